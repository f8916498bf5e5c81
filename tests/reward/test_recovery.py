"""Reward-only recovery surface (docs/reward.md "Reward-only recovery"): triples, signals, rates and the recovered merge."""

from __future__ import annotations

import json
import warnings

import pytest

from tests.fixtures import all_dash_action_text, fixture_row, role_action_text, valid_plan_values
from travel.reward.evaluator import evaluate_reference_plan
from travel.reward.joint import MERGE_RESULT_KEY, evaluate_joint_action
from travel.reward.penalties import reference_ngram_index
from travel.reward.recovery import (
    RecoveryMemo,
    accept_owned,
    build_recovery_surface,
    delimiters_closed,
    recover_agent,
    recover_triples,
    recovered_merge,
    required_contribution,
)
from travel.task.actions import parse_assignments
from travel.task.fields import owned_slots
from travel.task.merger import merge_agent_assignments

EMPTY_INDEX = reference_ngram_index("")


@pytest.fixture(scope="module")
def row():
    return fixture_row()


@pytest.fixture(scope="module")
def valid_texts(row):
    plan = valid_plan_values(row)
    return [role_action_text(0, plan, row.days), role_action_text(1, plan, row.days)]


# ---- triples ----------------------------------------------------------------------------------


def test_recovers_json_python_and_bare_key_triples():
    text = (
        '{"day": 2, "field": "lunch", "value": "Diner, Beta"} '
        "{'day': 1, 'field': 'breakfast', 'value': 'Cafe, Beta'} "
        'day: 3, field: "dinner", value: "Bistro, Beta"'
    )
    assert recover_triples(text) == [
        (2, "lunch", "Diner, Beta"),
        (1, "breakfast", "Cafe, Beta"),
        (3, "dinner", "Bistro, Beta"),
    ]


def test_triple_keys_are_case_insensitive_and_strings_are_decoded():
    text = r'"Day": 1, "FIELD": "Lunch", "Value": "Say \"hi\" \u00e9, Beta" ' + r"'day': 2, 'field': 'dinner', 'value': 'It\'s, Beta'"
    assert recover_triples(text) == [(1, "Lunch", 'Say "hi" é, Beta'), (2, "dinner", "It's, Beta")]


def test_triple_decoding_does_not_depend_on_warning_filters():
    text = r"'day': 1, 'field': 'lunch', 'value': 'a\h, Beta'"  # an invalid escape warns when decoded
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert recover_triples(text) == [(1, "lunch", "a\\h, Beta")]


@pytest.mark.parametrize(
    "text",
    [
        '"day": 1, "field": "lunch"',  # no value
        '"day": 1, "field": "lunch", "value": "Diner, Beta',  # unterminated value
        '"today": 1, "field": "lunch", "value": "Diner, Beta"',  # not the day key
        '"day": "1", "field": "lunch", "value": "Diner, Beta"',  # day must be digits
        '"day": ' + "9" * 5000 + ', "field": "lunch", "value": "x"',  # absurd day, no int() of it
        '"value": "Museum, Beta", "value": "Museum, Beta"',  # detached values
    ],
)
def test_incomplete_or_detached_text_yields_no_triple(text):
    assert recover_triples(text) == []


# ---- acceptance -------------------------------------------------------------------------------


def test_accept_owned_is_first_wins_non_atomic_and_role_scoped():
    owned = frozenset(owned_slots(1, 3))
    candidates = [
        (1, "breakfast", "Cafe, Beta"),
        (1, "Breakfast", "Diner, Beta"),  # same slot after casefolding: first wins
        (1, "current_city", "Beta"),  # the other role's field
        (True, "lunch", "Diner, Beta"),  # a bool is not a day
        (4, "lunch", "Diner, Beta"),  # out of range (not owned)
        (2, "lunch", "   "),  # blank
        (2, "dinner", "-"),  # an explicit dash is a value
        (2, "DINNER", "Bistro, Beta"),
        ["3", "lunch", "Diner, Beta"],  # a string day
        (2, "attraction", 5),  # a non-string value
        "not a triple",
    ]
    assert accept_owned(candidates, owned) == {(1, "breakfast"): "Cafe, Beta", (2, "dinner"): "-"}


# ---- delimiters, copy, overlong ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text, closed",
    [
        ('{"a": [1, {"b": "]}"}]}', True),  # brackets inside strings are ignored
        ('  {"a": []}  ', True),
        ('{"a": [}]', False),  # `}` closes before `]`
        ('{"a": [1]', False),
        ('{"a": "}', False),  # unterminated string
        ('x {"a": 1}', False),
        ('{"a": 1}}', False),
        ('{"a\\\\": [1]}', True),  # an escaped backslash ends before the closing quote
        ("{" + "[" * 50 + "]" * 50 + "}", True),  # deeper than the pair-deletion passes
        ("{" + "[" * 50 + "]" * 49 + "}", False),
        ("{" + "[{" * 30 + "}]" * 29 + "]}", False),
    ],
)
def test_delimiters_closed(text, closed):
    assert delimiters_closed(text) is closed


# ---- per-agent signals -------------------------------------------------------------------------


def _recover(text: str, agent_id: int, days: int = 3, index=EMPTY_INDEX):
    parsed = parse_assignments(text, agent_id, len(owned_slots(agent_id, days)), days)
    return recover_agent(text, agent_id, days, parsed.assignments, parsed.raw_item_count, index)


def test_valid_action_has_full_format_progress(valid_texts):
    for agent_id, text in enumerate(valid_texts):
        agent = _recover(text, agent_id)
        assert agent.format_progress == 1.0
        assert agent.structural == 1.0
        assert (agent.overflow_rate, agent.rejected_rate, agent.violation_rate) == (0.0, 0.0, 0.0)


def test_format_progress_weights_each_signal(valid_texts):
    body = json.loads(valid_texts[0])
    wrong_id = json.dumps({"agent_id": 1, "assignments": body["assignments"]})
    assert _recover(wrong_id, 0).format_progress == pytest.approx(0.90)  # agent_id_match lost
    prefixed = "Plan: " + valid_texts[0]
    assert _recover(prefixed, 0).format_progress == pytest.approx(0.75)  # object_start and closed lost
    as_string = json.dumps({"agent_id": 0, "assignments": json.dumps(body["assignments"])})
    agent = _recover(as_string, 0)
    assert (agent.assignments_list, agent.assignments_string) == (0.0, 1.0)
    # Inside the string every quote is escaped, so no complete triple is recovered either.
    assert agent.format_progress == pytest.approx(1.0 - 0.20 - 0.25)


def test_format_progress_ranks_a_list_over_a_copied_string(row, valid_texts):
    index = reference_ngram_index(row.reference_information)
    as_list = _recover(valid_texts[0], 0, index=index)
    copied = json.dumps({"agent_id": 0, "assignments": row.reference_information[:1500]})
    as_copy = _recover(copied, 0, index=index)
    assert as_list.format_progress > as_copy.format_progress
    assert as_copy.reference_copy_rate > 0.5


def test_every_scan_reads_the_first_max_action_chars_and_the_overlong_rate_the_whole_text(row):
    """What lies past the parser's cap is never scanned: recovered triples and copied reference text count
    only before it, so any text scores in bounded time, while its whole length still counts as overlong."""
    from travel.task.actions import MAX_ACTION_CHARS

    index = reference_ngram_index(row.reference_information)
    triple = '{"day": 1, "field": "current_city", "value": "from Alpha to Beta"} '
    copied = row.reference_information[:1500] + " "
    for payload, measure in ((triple, lambda a: a.owned_triple_progress), (copied, lambda a: a.reference_copy_rate)):
        within = _recover(payload + " " * MAX_ACTION_CHARS, 0, index=index)
        beyond = _recover(" " * MAX_ACTION_CHARS + payload, 0, index=index)
        assert measure(within) > 0 and measure(beyond) == 0
        assert within.overlong_rate == beyond.overlong_rate == 1.0


def test_repeated_values_do_not_inflate_progress():
    single = '{"agent_id": 0, "assignments": [{"day": 1, "field": "current_city", "value": "from Alpha to Beta"}]}'
    items = ", ".join(['{"day": 1, "field": "current_city", "value": "from Alpha to Beta"}'] * 9)
    repeated = '{"agent_id": 0, "assignments": [' + items + "]}"
    one, many = _recover(single, 0), _recover(repeated, 0)
    assert one.owned_triple_progress == many.owned_triple_progress == pytest.approx(1 / 9)
    assert many.rejected_rate == pytest.approx(8 / 9)  # nine raw items, one accepted


def test_overflow_and_rejection_rates(valid_texts):
    body = json.loads(valid_texts[0])
    body["assignments"].append({"day": 1, "field": "breakfast", "value": "Cafe, Beta"})  # not owned
    agent = _recover(json.dumps(body), 0)
    assert agent.raw_count == 10 and len(agent.accepted) == 9
    assert agent.overflow_rate == pytest.approx(1 / 10)
    assert agent.rejected_rate == pytest.approx(1 / 10)


def test_triples_hidden_in_a_strict_action_still_count(valid_texts):
    body = json.loads(valid_texts[0])
    hidden = "'day': 1, 'field': 'current_city', 'value': 'x' and 'day': 2, 'field': 'transportation', 'value': 'y'"
    body["assignments"][-1] = {"value": hidden, "day": 3, "field": "accommodation"}  # value first: not a regex triple
    agent = _recover(json.dumps(body), 0)
    # The parser reads 9 items (all owned slots filled); the regex reads 8 ordinary triples + 2 hidden ones.
    assert agent.raw_count == 10
    assert agent.overflow_rate == pytest.approx(1 / 10)
    assert len(agent.accepted) == 9 and (3, "accommodation", hidden) in agent.accepted


# ---- recovered merge and contribution ------------------------------------------------------------


def test_recovered_merge_equals_merging_the_serialised_actions(row):
    texts = ["{'agent_id': 0, 'assignments': [{'day': 1, 'field': 'current_city', 'value': ' from Alpha to Beta '},"
             " {'day': 2, 'field': 'accommodation', 'value': 'Hotel, Beta'}",
             'junk "day": 2, "field": "lunch", "value": "Diner, Beta" "day": 2, "field": "breakfast", "value": "-"']  # fmt: skip
    agents = [_recover(text, agent_id) for agent_id, text in enumerate(texts)]
    direct = recovered_merge(agents, row.days)
    merged = merge_agent_assignments([a.action_text() for a in agents], row.days, [9, 12])
    assert direct.plan == merged.plan
    assert direct.merged_assignments == merged.merged_assignments
    assert direct.per_agent_assignments == merged.per_agent_assignments
    ours, theirs = evaluate_reference_plan(direct, row), evaluate_reference_plan(merged, row)
    for key in ("assignment_coverage", "required_grounded_recall", "grounding_f1", "commonsense_soft",
                "hard_constraint_soft", "required_slot_validity"):  # fmt: skip
        assert ours[key] == theirs[key], key


def test_required_contribution_counts_valid_required_owned_slots():
    required = frozenset({(1, "current_city"), (1, "transportation"), (2, "breakfast"), (2, "current_city")})
    validity = {(1, "current_city"): True, (1, "transportation"): False, (2, "breakfast"): True, (2, "current_city"): True}
    text = ('{"agent_id": 0, "assignments": [{"day": 1, "field": "current_city", "value": "x"}, '
            '{"day": 1, "field": "transportation", "value": "y"}]}')  # fmt: skip
    agent = _recover(text, 0)
    # required owned by logistics: (1,cc), (1,tr), (2,cc); filled and valid: (1,cc) only.
    assert required_contribution(agent, required, validity) == pytest.approx(1 / 3)
    nothing_required = frozenset({(1, "current_city")})
    assert required_contribution(_recover("{}", 1), nothing_required, validity) == 0.0


def test_surface_reuses_the_strict_plan_when_recovery_adds_nothing(row, valid_texts):
    detail = evaluate_joint_action(valid_texts, row)
    surface = build_recovery_surface(valid_texts, row, detail[MERGE_RESULT_KEY], detail)
    assert surface.reused_strict_plan and surface.recovered_plan is detail
    assert surface.contributions == (1.0, 1.0)
    assert surface.balance_terms == (1.0, 1.0)


def test_surface_evaluates_a_truncated_action_once_per_recovered_plan(row, valid_texts):
    texts = [valid_texts[0][:-40], valid_texts[1]]
    detail = evaluate_joint_action(texts, row)
    memo = RecoveryMemo()
    first = build_recovery_surface(texts, row, detail[MERGE_RESULT_KEY], detail, memo)
    assert not first.reused_strict_plan and len(memo.plans) == 1 and len(memo.agents) == 2
    again = build_recovery_surface(texts, row, detail[MERGE_RESULT_KEY], detail, memo)
    assert again.recovered_plan is first.recovered_plan
    assert again.agents[0] is first.agents[0]
    assert build_recovery_surface(texts, row, detail[MERGE_RESULT_KEY], detail).recovered_plan == first.recovered_plan
    # The truncation cut the last complete triple of day 3 only: 8 of 9 logistics slots recovered.
    assert len(first.agents[0].accepted) == 8
    assert first.agents[0].closed_delimiters == 0.0
    assert detail["agent_0/required_grounded_contribution"] < first.contributions[0]


def test_all_dash_surface_has_full_progress_and_no_contribution(row):
    texts = [all_dash_action_text(0, row.days), all_dash_action_text(1, row.days)]
    detail = evaluate_joint_action(texts, row)
    surface = build_recovery_surface(texts, row, detail[MERGE_RESULT_KEY], detail)
    assert [a.format_progress for a in surface.agents] == [1.0, 1.0]
    assert surface.contributions == (0.0, 0.0)
