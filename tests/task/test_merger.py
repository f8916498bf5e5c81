"""The deterministic merger: acceptance, overlap, conflicts, capacity, duplicates and invalid slots."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures import (
    all_dash_action_text,
    five_day_fixture_row,
    fixture_row,
    role_action_text,
    valid_plan_values,
)
from travel.task.fields import PLAN_FIELDS, owned_slots
from travel.task.merger import MergeResult, merge_agent_assignments


def text(agent_id: int, triples) -> str:
    items = [{"day": day, "field": field, "value": value} for day, field, value in triples]
    return json.dumps({"agent_id": agent_id, "assignments": items})


def valid_texts(days: int = 3):
    row = fixture_row() if days == 3 else five_day_fixture_row()
    plan = valid_plan_values(row)
    return plan, [role_action_text(0, plan, days), role_action_text(1, plan, days)]


def assert_clean(result: MergeResult) -> None:
    assert result.conflict_slots == []
    assert (result.overlap_count, result.self_duplicate_count, result.invalid_slot_count,
            result.extra_assignment_count) == (0, 0, 0, 0)


@pytest.mark.parametrize("days", [3, 5])
def test_valid_role_actions_merge_into_the_canonical_plan(days):
    plan, texts = valid_texts(days)
    result = merge_agent_assignments(texts, days, [3 * days, 4 * days])
    assert result.plan == plan
    assert_clean(result)
    assert len(result.merged_assignments) == 7 * days
    assert [set(a) for a in result.per_agent_assignments] == [set(owned_slots(0, days)), set(owned_slots(1, days))]
    assert all(parsed.parse_success for parsed in result.parsed)
    assert result.capacity == 4 * days
    assert result.merged_sources[(1, "current_city")] == 0 and result.merged_sources[(1, "lunch")] == 1


def test_all_dash_actions_cover_every_slot_with_dashes():
    result = merge_agent_assignments([all_dash_action_text(0, 3), all_dash_action_text(1, 3)], 3, [9, 12])
    assert len(result.merged_assignments) == 21
    assert all(entry[field] == "-" for entry in result.plan for field in PLAN_FIELDS)
    assert_clean(result)


def test_plan_rows_hold_every_field_and_missing_slots_are_dashes():
    result = merge_agent_assignments([text(0, [(2, "current_city", "Beta")]), text(1, [])], 3, [9, 12])
    assert [entry["day"] for entry in result.plan] == [1, 2, 3]
    assert all(set(entry) == {"day", *PLAN_FIELDS} for entry in result.plan)
    assert result.plan[1]["current_city"] == "Beta"
    assert result.merged_assignments == {(2, "current_city"): "Beta"}
    assert sum(value != "-" for entry in result.plan for key, value in entry.items() if key != "day") == 1


def test_identical_canonical_proposals_are_accepted_once_as_overlap():
    first = text(0, [(1, "current_city", "from Alpha to Beta")])
    second = text(1, [(1, "current_city", "  FROM alpha   to Beta "), (1, "lunch", "-")])
    result = merge_agent_assignments([first, second], 3, [9, 12])
    assert result.overlap_count == 1 and result.conflict_slots == []
    assert result.plan[0]["current_city"] == "from Alpha to Beta"  # the first proposal's text
    assert result.merged_sources[(1, "current_city")] == 0


def test_three_identical_proposals_count_two_overlaps():
    same = [text(agent, [(1, "lunch", "Cafe, Beta")]) for agent in range(3)]
    result = merge_agent_assignments(same, 2, [8, 8, 8])
    assert result.overlap_count == 2 and result.merged_assignments == {(1, "lunch"): "Cafe, Beta"}


def test_differing_proposals_conflict_and_the_slot_stays_empty():
    plan, texts = valid_texts()
    intruder = json.loads(texts[1])
    intruder["assignments"].append({"day": 2, "field": "current_city", "value": "Gamma"})
    result = merge_agent_assignments([texts[0], json.dumps(intruder)], 3, [9, 13])
    assert result.conflict_slots == [(2, "current_city")]
    assert (2, "current_city") not in result.merged_assignments
    assert result.plan[1]["current_city"] == "-"
    assert result.overlap_count == 0 and len(result.merged_assignments) == 20
    assert all(result.plan[d][f] == plan[d][f] for d in range(3) for f in PLAN_FIELDS if (d, f) != (1, "current_city"))


def test_a_dash_against_a_value_is_also_a_conflict():
    result = merge_agent_assignments([text(0, [(2, "lunch", "-")]), text(1, [(2, "lunch", "Cafe, Beta")])], 3, [9, 12])
    assert result.conflict_slots == [(2, "lunch")] and result.plan[1]["lunch"] == "-"


def test_over_capacity_action_is_dropped_whole():
    plan, texts = valid_texts()
    bloated = json.loads(texts[1])
    bloated["assignments"].append({"day": 3, "field": "accommodation", "value": "Motel, Beta"})
    result = merge_agent_assignments([texts[0], json.dumps(bloated)], 3, [9, 12])
    assert result.extra_assignment_count == 1
    assert result.per_agent_assignments[1] == {}
    assert not result.parsed[1].capacity_valid and result.parsed[1].raw_item_count == 13
    assert all(entry[field] == "-" for entry in result.plan for field in ("breakfast", "attraction", "lunch", "dinner"))
    assert all(result.plan[d][f] == plan[d][f] for d in range(3) for f in ("current_city", "transportation", "accommodation"))
    assert result.conflict_slots == [] and result.overlap_count == 0


def test_extra_count_is_the_excess_over_capacity():
    triples = [(day, "lunch", "-") for day in range(1, 4)] + [(day, "dinner", "-") for day in range(1, 4)]
    result = merge_agent_assignments([text(0, []), text(1, triples)], 3, [9, 2])
    assert result.extra_assignment_count == 4 and result.merged_assignments == {}


def test_self_duplicate_keeps_the_first_value():
    triples = [(1, "accommodation", "Hotel, Beta"), (1, "accommodation", "Motel, Beta"), (1, "ACCOMMODATION", "Inn, Beta")]
    result = merge_agent_assignments([text(0, triples), text(1, [])], 3, [9, 12])
    assert result.self_duplicate_count == 2
    assert result.plan[0]["accommodation"] == "Hotel, Beta"
    assert result.per_agent_assignments[0] == {(1, "accommodation"): "Hotel, Beta"}
    assert result.conflict_slots == []


def test_invalid_slots_are_counted_with_the_parsers_invalid_items():
    items = [
        {"day": 0, "field": "lunch", "value": "Cafe, Beta"},
        {"day": 4, "field": "lunch", "value": "Cafe, Beta"},
        {"day": "2", "field": "lunch", "value": "Cafe, Beta"},
        {"day": True, "field": "lunch", "value": "Cafe, Beta"},
        {"day": 2, "field": "snack", "value": "Cafe, Beta"},
        {"day": 2, "field": "lunch", "value": 15},
        42,
        ["only", "two"],
        {"day": 2, "field": "dinner", "value": "Bistro, Beta"},
    ]
    completion = json.dumps({"agent_id": 1, "assignments": items})
    result = merge_agent_assignments([text(0, []), completion], 3, [9, 12])
    assert result.parsed[1].invalid_item_count == 2
    assert result.invalid_slot_count == 8
    assert result.merged_assignments == {(2, "dinner"): "Bistro, Beta"}


def test_fields_are_lowercased_and_values_stripped_with_blank_or_null_as_dash():
    items = [
        {"day": 2, "field": "Lunch", "value": "  Cafe, Beta  "},
        {"day": 2, "field": "dinner", "value": "   "},
        {"day": 2, "field": "breakfast", "value": None},
    ]
    result = merge_agent_assignments([text(0, []), json.dumps({"agent_id": 1, "assignments": items})], 3, [9, 12])
    assert "assignment_value" in result.parsed[1].error_codes  # strictness is the parser's business
    assert result.merged_assignments == {(2, "lunch"): "Cafe, Beta", (2, "dinner"): "-", (2, "breakfast"): "-"}
    assert result.invalid_slot_count == 0


def test_recovered_non_strict_actions_still_contribute_slots():
    fenced = "```json\n" + text(1, [(2, "lunch", "Cafe, Beta")]) + "\n```"
    result = merge_agent_assignments([text(0, []), fenced], 3, [9, 12])
    assert not result.parsed[1].parse_success and result.plan[1]["lunch"] == "Cafe, Beta"


def test_undecodable_texts_give_an_empty_plan():
    result = merge_agent_assignments(["no json here", ""], 2, [6, 8])
    assert result.merged_assignments == {} and result.plan == [
        {"day": day, **{field: "-" for field in PLAN_FIELDS}} for day in (1, 2)
    ]
    assert [p.error for p in result.parsed] == ["not_strict_json,decode_failed"] * 2


def test_default_capacity_is_ceil_of_seven_days_over_agents():
    triples = [(1, field, "-") for field in PLAN_FIELDS] + [(2, field, "-") for field in PLAN_FIELDS[:4]]
    result = merge_agent_assignments([text(0, triples[:8]), text(1, triples[:9])], 2)
    assert result.capacity == 7  # ceil(14 / 2)
    assert result.extra_assignment_count == 1 + 2


def test_agent_ids_are_checked_against_position():
    result = merge_agent_assignments([text(1, [(1, "lunch", "Cafe, Beta")]), text(1, [])], 3, [9, 12])
    assert result.parsed[0].error_codes == ("agent_id_mismatch",)
    assert result.plan[0]["lunch"] == "Cafe, Beta"  # ownership is the evaluator's business, not the merger's


def test_bad_call_arguments_raise():
    with pytest.raises(ValueError):
        merge_agent_assignments(["", ""], 0, [1, 1])
    with pytest.raises(ValueError):
        merge_agent_assignments(["", ""], 3, [9])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=3), st.integers(1, 7))
def test_merge_never_raises_on_arbitrary_text(texts, days):
    result = merge_agent_assignments(texts, days, [3 * days + 1] * len(texts))
    assert len(result.plan) == days and len(result.parsed) == len(texts)
    assert min(result.overlap_count, result.self_duplicate_count, result.invalid_slot_count,
               result.extra_assignment_count) >= 0


item = st.fixed_dictionaries(
    {
        "day": st.integers(-1, 5) | st.none() | st.text(max_size=2),
        "field": st.sampled_from(PLAN_FIELDS + ("Lunch", "snack")),
        "value": st.sampled_from(["-", "Cafe, Beta", "cafe,  beta", "Diner, Beta", "", " "]) | st.none() | st.integers(),
    }
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(item, max_size=10), min_size=2, max_size=2), st.integers(1, 4))
def test_merge_accounts_for_every_proposal(actions, days):
    texts = [json.dumps({"agent_id": agent, "assignments": items}) for agent, items in enumerate(actions)]
    result = merge_agent_assignments(texts, days, [10, 10])
    accepted = sum(len(a) for a in result.per_agent_assignments)
    recovered = sum(len(p.assignments) + p.invalid_item_count for p in result.parsed)
    assert accepted + result.self_duplicate_count + result.invalid_slot_count == recovered
    conflicted = sum(1 for slot in result.conflict_slots for a in result.per_agent_assignments if slot in a)
    assert len(result.merged_assignments) + result.overlap_count + conflicted == accepted
    for (day, field), value in result.merged_assignments.items():
        assert result.plan[day - 1][field] == value
