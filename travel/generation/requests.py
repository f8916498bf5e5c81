"""Decode requests for a row: a role's prompt rendered through the model's chat template and tokenized."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from travel.generation.chat import render_role_prompt
from travel.generation.decoder import DecodeRequest
from travel.task.prompts import build_role_prompt

if TYPE_CHECKING:
    from travel.data.row import TravelRow


def role_request(tokenizer: Any, row: TravelRow, agent_id: int, system_prompt: str | None = None) -> DecodeRequest:
    """The request of `agent_id` for `row`: chat-rendered prompt ending with the assistant prefill, tokenized once."""
    prompt = render_role_prompt(tokenizer, build_role_prompt(row, agent_id, system_prompt=system_prompt))
    ids = tuple(tokenizer.encode(prompt, add_special_tokens=False))
    return DecodeRequest(prompt=prompt, agent_id=agent_id, days=row.days, prompt_ids=ids)
