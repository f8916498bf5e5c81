"""Property tests: any model text scores to a finite reward in [-0.25, 1.0] with finite metrics."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures import fixture_row, role_action_text, valid_plan_values
from travel.reward import PUBLIC_METRIC_NAMES, REWARD_RANGE, score_joint_action, score_joint_actions

ROW = fixture_row()
PLAN = valid_plan_values(ROW)
VALID = (role_action_text(0, PLAN, ROW.days), role_action_text(1, PLAN, ROW.days))
LOW, HIGH = REWARD_RANGE
# Characters that matter to the parsers, plus arbitrary text.
JSON_CHARS = st.sampled_from(list('{}[]":,\'\\ -0123456789dayfieldvalue\n') + ["\u00e9", "\x00", "\ud7ff"])
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_well_formed(result) -> None:
    assert LOW <= result.reward <= HIGH
    assert math.isfinite(result.reward)
    assert set(PUBLIC_METRIC_NAMES) <= set(result.metrics)
    bad = {k: v for k, v in result.metrics.items() if not (isinstance(v, float) and math.isfinite(v))}
    assert not bad
    assert result.metrics["reward"] == result.reward


@SETTINGS
@given(st.text(max_size=400), st.text(max_size=400))
def test_arbitrary_text_pairs(text0, text1):
    assert_well_formed(score_joint_action(ROW, [text0, text1]))


@SETTINGS
@given(st.text(alphabet=JSON_CHARS, max_size=300), st.text(alphabet=JSON_CHARS, max_size=300))
def test_json_like_noise(text0, text1):
    assert_well_formed(score_joint_action(ROW, [text0, text1]))


@pytest.mark.parametrize("agent_id", [0, 1])
def test_every_prefix_of_a_valid_action(agent_id):
    text = VALID[agent_id]
    pairs = []
    for cut in range(len(text) + 1):
        texts = list(VALID)
        texts[agent_id] = text[:cut]
        pairs.append(texts)
    results = score_joint_actions(ROW, pairs)
    for result in results:
        assert_well_formed(result)
    assert results[-1].reward == 1.0
    assert max(r.reward for r in results[:-1]) <= 0.07  # one malformed (truncated) agent


edit = st.tuples(
    st.sampled_from(["insert", "delete", "replace"]),
    st.integers(min_value=0, max_value=10_000),
    st.one_of(JSON_CHARS, st.characters()),
)


@SETTINGS
@given(st.sampled_from([0, 1]), st.lists(edit, min_size=1, max_size=8))
def test_mutations_of_a_valid_action(agent_id, edits):
    text = VALID[agent_id]
    for operation, position, char in edits:
        position %= len(text) + 1
        if operation == "insert":
            text = text[:position] + char + text[position:]
        elif operation == "delete":
            text = text[:position] + text[position + 1 :]
        else:
            text = text[:position] + char + text[position + 1 :]
    texts = list(VALID)
    texts[agent_id] = text
    assert_well_formed(score_joint_action(ROW, texts))
