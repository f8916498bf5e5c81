"""Rendering a role prompt for generation: chat template (system, user, generation prompt) + assistant prefill.

The prompt text is what the structured decoder tokenizes; the prefill is appended after the
template's generation prompt, so the model continues inside the first value's opening quote.
"""

from __future__ import annotations

from typing import Any

from travel.task.prompts import RolePrompt


class ChatTemplateError(ValueError):
    """The tokenizer cannot render chat messages."""


def chat_messages(system: str, user: str) -> list[dict[str, str]]:
    """[system, user], the system message omitted when empty."""
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": user})
    return messages


def render_chat_prompt(tokenizer: Any, system: str, user: str, prefill: str = "") -> str:
    """The chat-formatted prompt text with the generation prompt, followed by `prefill`."""
    if not getattr(tokenizer, "chat_template", None):
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise ChatTemplateError(
            f"tokenizer {name!r} has no chat template; role prompts are rendered as [system, user] chat messages "
            "with a generation prompt, so the model's tokenizer must define one"
        )
    rendered = tokenizer.apply_chat_template(chat_messages(system, user), add_generation_prompt=True, tokenize=False)
    return rendered + prefill


def render_role_prompt(tokenizer: Any, prompt: RolePrompt) -> str:
    return render_chat_prompt(tokenizer, prompt.system, prompt.user, prompt.prefill)
