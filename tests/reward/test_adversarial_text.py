"""Hostile action text is scored in bounded time: every adversarial family up to 1 MB takes under a second (or,
on a machine too slow for that, no more than linear growth from an eighth of its size allows) and its reward
stays in the declared range (the parser's fence regex is linear, and texts longer than
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
LINEAR_SLACK = 3.0  # timing noise allowed over linear growth; quadratic growth from an eighth is 8x linear
SIZES = st.one_of(st.integers(1, 4096), st.integers(MAX_ACTION_CHARS - 2048, MAX_ACTION_CHARS), st.integers(1, 1 << 20))


@pytest.fixture(scope="module")
def row():
    from tests.fixtures import fixture_raw
    from travel.data.normalise import normalise_row

    return normalise_row(fixture_raw(), 0)


def score_timed(row, text, role):
    """The reward and the seconds it took, with the garbage collector paused: a collection of the test
    process's own heap is not the parser's time (nor is one run before each call, which in a worker that has run
    many tests takes longer than the call)."""
    actions = [text, ""] if role == 0 else ["", text]
    gc.disable()
    try:
        started = time.perf_counter()
        result = score_joint_action(row, actions)
        return result, time.perf_counter() - started
    finally:
        gc.enable()


def assert_bounded_time(row, family, text, role, seconds):
    """Under a second; past it (a slow or loaded machine), at most LINEAR_SLACK x linear growth from the same
    family at an eighth of the length, timed now in the same process."""
    if seconds < SECONDS_PER_CALL:
        return
    eighth = len(text) // 8
    _, small_seconds = score_timed(row, FAMILIES[family](eighth), role)
    bound = 8 * LINEAR_SLACK * small_seconds
    assert seconds < bound, (
        f"{family} at {len(text)} chars took {seconds:.2f} s: over {SECONDS_PER_CALL} s, and over {bound:.2f} s, "
        f"{LINEAR_SLACK}x linear growth from {small_seconds:.3f} s at {eighth} chars"
    )


@pytest.mark.parametrize("size", [MAX_ACTION_CHARS, 1 << 20])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_at_the_cap_and_at_one_megabyte(row, family, size):
    for role in (0, 1):
        text = FAMILIES[family](size)
        result, seconds = score_timed(row, text, role)
        assert_bounded_time(row, family, text, role, seconds)
        low, high = DEFAULT_CONFIG.reward_range
        assert low <= result.reward <= high


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=SIZES, role=st.integers(0, 1))
def test_each_family_is_scored_fast_and_in_range(row, family, size, role):
    text = FAMILIES[family](size)
    result, seconds = score_timed(row, text, role)
    assert_bounded_time(row, family, text, role, seconds)
    low, high = DEFAULT_CONFIG.reward_range
    assert low <= result.reward <= high


def test_a_text_beyond_the_cap_is_a_failed_action_even_when_it_is_valid_json():
    item = '{"day": 1, "field": "breakfast", "value": "-"}'
    valid = '{"agent_id": 1, "assignments": [' + ", ".join([item] * 3) + "]}"
    assert parse_assignments(valid, 1, 64, 3).decode_success
    padded = valid[:-1] + " " * MAX_ACTION_CHARS + "}"
    parsed = parse_assignments(padded, 1, 64, 3)
    assert not parsed.decode_success and not parsed.parse_success and "decode_failed" in parsed.error_codes
