"""Forced sequences of a role's action: exact schema text, close strings, budget figures, tokenizer checks."""

from __future__ import annotations

import pytest

from travel.agents.offline_tokenizer import build_offline_tokenizer
from travel.generation.skeleton import (
    SEQUENCES_PER_SLOT,
    SkeletonTokenizationError,
    build_slot_plan,
    close_code,
    close_text,
)
from travel.task.fields import owned_slots
from travel.task.roles import assistant_prefill, format_action


@pytest.fixture(scope="module")
def tokenizer():
    return build_offline_tokenizer()


@pytest.mark.parametrize("agent_id, days", [(0, 3), (1, 3), (0, 5), (1, 5)])
def test_plan_rebuilds_format_action(tokenizer, agent_id, days):
    plan = build_slot_plan(tokenizer, agent_id, days)
    slots = owned_slots(agent_id, days)
    values = [f"v{k}" for k in range(len(slots))]
    text = plan.prefix + "".join(value + '"' + suffix for value, suffix in zip(values, plan.suffixes))
    assert plan.prefix == assistant_prefill(agent_id)
    assert text == format_action(agent_id, [(d, f, v) for (d, f), v in zip(slots, values)])
    assert len(plan.sequences) == SEQUENCES_PER_SLOT * len(slots)


def test_close_strings_finish_every_escape_state():
    bodies = {state: close_text(state, True)[:-1] for state in range(6)}
    assert bodies == {0: "", 1: "n", 2: "0000", 3: "000", 4: "00", 5: "0"}
    assert close_text(0, False) == '-"' and close_text(1, False) == 'n-"' and close_text(2, False) == '0000-"'
    assert sorted(close_code(s, c) for s in range(6) for c in (False, True)) == list(range(1, 13))


def test_sequences_decode_to_close_plus_suffix(tokenizer):
    plan = build_slot_plan(tokenizer, 1, 3)
    for slot, suffix in enumerate(plan.suffixes):
        assert tokenizer.decode(list(plan.sequences[plan.sequence_id(slot, 0)])) == suffix
        for state in range(6):
            for content in (False, True):
                ids = plan.sequences[plan.sequence_id(slot, close_code(state, content))]
                assert tokenizer.decode(list(ids)) == close_text(state, content) + suffix


def test_budget_figures_are_token_counts_of_the_all_dash_tail(tokenizer):
    plan = build_slot_plan(tokenizer, 0, 3)
    count = lambda text: len(tokenizer.encode(text, add_special_tokens=False))
    per_slot = [count('-"') + count(suffix) for suffix in plan.suffixes]
    assert plan.minimum_tokens == sum(per_slot)
    for slot in range(plan.num_slots):
        assert plan.tails[slot] == count(plan.suffixes[slot]) + sum(per_slot[slot + 1 :])
    closes = [close_text(s, c) for s in range(6) for c in (False, True)]
    assert plan.longest_close == max(count(text) for text in closes)


class _LossyTokenizer:
    """Decodes with spaces dropped, like a tokenizer whose cleanup rewrites text."""

    def __init__(self, inner):
        self.inner = inner

    def encode(self, text, add_special_tokens=False):
        return self.inner.encode(text, add_special_tokens=add_special_tokens)

    def decode(self, ids, **kwargs):
        return self.inner.decode(ids, **kwargs).replace(" ", "")


def test_a_tokenizer_that_does_not_round_trip_the_schema_is_rejected(tokenizer):
    with pytest.raises(SkeletonTokenizationError, match="decodes to"):
        build_slot_plan(_LossyTokenizer(tokenizer), 0, 1)
