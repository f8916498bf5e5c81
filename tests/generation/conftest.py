"""Shared objects of the generation tests: the tiny random model (float32, CPU) and short role prompts."""

from __future__ import annotations

import json

import pytest

from travel.agents.models import build_tiny_random
from travel.generation import DecodeRequest, render_chat_prompt
from travel.task.actions import parse_assignments
from travel.task.fields import owned_slots
from travel.task.roles import assistant_prefill, format_action, role_capacity


@pytest.fixture(scope="session")
def tiny():
    return build_tiny_random(seed=0)


@pytest.fixture(autouse=True)
def one_thread(one_torch_thread):
    """Every generation test runs on one intra-op thread (tests/conftest.py)."""


def short_request(tokenizer, agent_id: int, days: int, note: str = "") -> DecodeRequest:
    prompt = render_chat_prompt(
        tokenizer,
        "Return only the JSON object.",
        f"Plan a {days}-day trip. {note}".strip(),
        assistant_prefill(agent_id),
    )
    return DecodeRequest(prompt, agent_id, days)


def assert_strict_action(text: str, agent_id: int, days: int) -> list[str]:
    """The action parses strictly with exactly the owned slots in canonical order; returns its values."""
    result = parse_assignments(text, agent_id, role_capacity(agent_id, days), days)
    assert result.parse_success, (result.error, text)
    assert result.agent_id == agent_id
    assert [(day, field) for day, field, _ in result.assignments] == list(owned_slots(agent_id, days))
    values = [value for _, _, value in result.assignments]
    data = json.loads(text)
    assert list(data) == ["agent_id", "assignments"]
    if "\\u" not in text and "\\/" not in text:  # other escapes are the ones json.dumps writes itself
        assert text == format_action(agent_id, result.assignments)
    return values
