"""Hostile action text is scored in bounded time: every adversarial family up to 1 MB takes under a second and
its reward stays in the declared range (the parser's fence regex is linear, and texts longer than
travel.task.actions.MAX_ACTION_CHARS are failed actions without being parsed)."""

import gc
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reward.adversarial_families import FAMILIES
from travel.reward import DEFAULT_CONFIG, score_joint_action
from travel.task.actions import MAX_ACTION_CHARS, parse_assignments

SECONDS_PER_CALL = 1.0
SIZES = st.one_of(st.integers(1, 4096), st.integers(MAX_ACTION_CHARS - 2048, MAX_ACTION_CHARS), st.integers(1, 1 << 20))


@pytest.fixture(scope="module")
def row():
    from tests.fixtures import fixture_raw
    from travel.data.normalise import normalise_row

    return normalise_row(fixture_raw(), 0)


def score_timed(row, text, role):
    """The reward and the seconds it took, with the garbage collector paused: a collection of the test
    process's own heap is not the parser's time."""
    actions = [text, ""] if role == 0 else ["", text]
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        result = score_joint_action(row, actions)
        return result, time.perf_counter() - started
    finally:
        gc.enable()


@pytest.mark.parametrize("size", [MAX_ACTION_CHARS, 1 << 20])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_at_the_cap_and_at_one_megabyte(row, family, size):
    for role in (0, 1):
        result, seconds = score_timed(row, FAMILIES[family](size), role)
        assert seconds < SECONDS_PER_CALL, f"{family} at {size} chars took {seconds:.2f} s"
        low, high = DEFAULT_CONFIG.reward_range
        assert low <= result.reward <= high


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=SIZES, role=st.integers(0, 1))
def test_each_family_is_scored_fast_and_in_range(row, family, size, role):
    text = FAMILIES[family](size)
    result, seconds = score_timed(row, text, role)
    assert seconds < SECONDS_PER_CALL, f"{family} at {len(text)} chars took {seconds:.2f} s"
    low, high = DEFAULT_CONFIG.reward_range
    assert low <= result.reward <= high


def test_a_text_beyond_the_cap_is_a_failed_action_even_when_it_is_valid_json():
    item = '{"day": 1, "field": "breakfast", "value": "-"}'
    valid = '{"agent_id": 1, "assignments": [' + ", ".join([item] * 3) + "]}"
    assert parse_assignments(valid, 1, 64, 3).decode_success
    padded = valid[:-1] + " " * MAX_ACTION_CHARS + "}"
    parsed = parse_assignments(padded, 1, 64, 3)
    assert not parsed.decode_success and not parsed.parse_success and "decode_failed" in parsed.error_codes
