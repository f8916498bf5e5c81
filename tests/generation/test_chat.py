"""Chat rendering of role prompts: system, user, generation prompt, then the assistant prefill."""

from __future__ import annotations

import pytest

from tests.fixtures import fixture_row
from travel.agents.offline_tokenizer import build_offline_tokenizer
from travel.generation import ChatTemplateError, render_chat_prompt, render_role_prompt
from travel.task.prompts import build_role_prompt
from travel.task.roles import assistant_prefill


def test_template_renders_system_user_and_generation_prompt():
    tokenizer = build_offline_tokenizer()
    text = render_chat_prompt(tokenizer, "Be brief.", "Plan a trip.", '{"agent_id": 0')
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nPlan a trip.<|im_end|>\n"
        '<|im_start|>assistant\n{"agent_id": 0'
    )


def test_empty_system_message_is_omitted():
    tokenizer = build_offline_tokenizer()
    assert render_chat_prompt(tokenizer, "", "Hi") == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_role_prompt_ends_with_the_prefill_and_holds_both_messages():
    tokenizer = build_offline_tokenizer()
    row = fixture_row()
    for agent in (0, 1):
        prompt = build_role_prompt(row, agent)
        text = render_role_prompt(tokenizer, prompt)
        assert text.endswith("<|im_start|>assistant\n" + assistant_prefill(agent))
        assert prompt.system in text and prompt.user in text


def test_tokenizer_without_a_chat_template_is_an_error():
    tokenizer = build_offline_tokenizer()
    tokenizer.chat_template = None
    with pytest.raises(ChatTemplateError, match="no chat template"):
        render_chat_prompt(tokenizer, "system", "user")
