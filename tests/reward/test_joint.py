"""Joint-action metrics: per-role validity and contribution, team gates, rates and guards (docs/reward.md
"Joint-action metrics").

In the 3-day fixture logistics owns 9 slots, 7 of them required (3 current_city, 2 transportation,
2 accommodation), and experience owns 12 slots, 4 of them required (the day-2 stay meals and
attraction). Expected values below follow from those counts.
"""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings, strategies as st

from tests.fixtures import (
    all_dash_action_text,
    fixture_row,
    five_day_fixture_row,
    reference_information,
    role_action_text,
    three_day_records,
    valid_plan_values,
)
from travel.reward.joint import (
    INTERNAL_DETAIL_KEYS,
    MERGE_RESULT_KEY,
    bottleneck,
    check_detail,
    evaluate_joint_action,
    scalar_metrics,
)
from travel.task.fields import owned_slots
from travel.task.merger import MergeResult

ROW = fixture_row()
VALID = valid_plan_values(ROW)
LOGISTICS = role_action_text(0, VALID, 3)
EXPERIENCE = role_action_text(1, VALID, 3)


def edited(plan, cells):
    plan = copy.deepcopy(plan)
    for (day, field), value in cells.items():
        plan[day - 1][field] = value
    return plan


def action(agent_id: int, items: list[tuple[int, str, str]]) -> str:
    return json.dumps(
        {"agent_id": agent_id, "assignments": [{"day": d, "field": f, "value": v} for d, f, v in items]}
    )


def items_of(agent_id: int, plan, days: int) -> list[tuple[int, str, str]]:
    by_day = {entry["day"]: entry for entry in plan}
    return [(day, field, by_day[day][field]) for day, field in owned_slots(agent_id, days)]


def test_required_owned_counts_used_below():
    assert len(ROW.required_slots & set(owned_slots(0, 3))) == 7
    assert len(ROW.required_slots & set(owned_slots(1, 3))) == 4


def test_valid_joint_action_succeeds_everywhere():
    detail = evaluate_joint_action([LOGISTICS, EXPERIENCE], ROW)
    ultimate = {k: v for k, v in detail.items() if k.startswith("ultimate/")}
    assert len(ultimate) == 23
    assert all(value == 1.0 for value in ultimate.values()), ultimate
    assert detail["action_validity"] == 1.0
    assert detail["team_action_valid"] == 1.0
    assert detail["required_cooperative_contribution"] == 1.0
    assert detail["cooperative_contribution"] == 1.0
    for agent_id in (0, 1):
        assert detail[f"agent_{agent_id}/action_validity"] == 1.0
        assert detail[f"agent_{agent_id}/soft_action_validity"] == 1.0
        assert detail[f"agent_{agent_id}/verified_contribution"] == 1.0
        assert detail[f"agent_{agent_id}/required_grounded_contribution"] == 1.0
    assert detail["agent_0/assignment_count"] == 9 and detail["agent_1/assignment_count"] == 12
    assert detail["overlap_rate"] == detail["conflict_rate"] == detail["invalid_action_rate"] == 0.0
    assert detail["parser_error/any"] == 0.0
    assert detail["evaluation_backend"] == "reference_constraint_scaffold_completion_metrics"


def test_two_different_valid_joint_actions_both_succeed():
    other = edited(VALID, {(1, "accommodation"): "Motel, Beta", (2, "accommodation"): "Motel, Beta",
                           (2, "lunch"): "Brunch, Beta", (2, "attraction"): "Park, Beta"})
    detail = evaluate_joint_action([role_action_text(0, other, 3), role_action_text(1, other, 3)], ROW)
    assert detail["ultimate/collaboration_success"] == 1.0
    assert detail["estimated_cost"] == pytest.approx(20 + 25 + 2 * 80 + 10 + 12 + 20)


HEADLINE_KEYS = (
    "action_validity", "ultimate/team_action_success", "required_cooperative_contribution",
    "required_grounded_recall", "entity_grounding_precision", "grounding_f1", "required_cost_completeness",
    "budget_constraint_soft", "route_scaffold_match_rate", "ultimate/reference_plan_delivery",
    "ultimate/required_plan_completion", "ultimate/reference_commonsense_micro", "ultimate/reference_hard_micro",
    "ultimate/reference_budget_pass", "ultimate/reference_plan_success", "ultimate/collaboration_success",
)
AGGREGATE_KEYS = (
    "commonsense_pass_count", "commonsense_applicable_count", "hard_pass_count", "hard_applicable_count",
    "required_valid_count", "required_slot_count", "grounded_entity_count", "predicted_entity_count",
    "required_cost_known_count", "required_cost_slot_count",
)


def test_headline_and_aggregate_keys_are_present_for_any_text():
    for texts in ([LOGISTICS, EXPERIENCE], ["", "not json"]):
        metrics = scalar_metrics(evaluate_joint_action(texts, ROW))
        missing = [k for k in (*HEADLINE_KEYS, *(f"_aggregate/{k}" for k in AGGREGATE_KEYS)) if k not in metrics]
        assert not missing


def test_merge_result_is_returned_for_reuse():
    detail = evaluate_joint_action([LOGISTICS, EXPERIENCE], ROW)
    merge = detail[MERGE_RESULT_KEY]
    assert isinstance(merge, MergeResult)
    assert merge.plan == detail["merged_plan"] == VALID
    assert MERGE_RESULT_KEY in INTERNAL_DETAIL_KEYS


def test_scalar_metrics_drops_internal_entries():
    metrics = scalar_metrics(evaluate_joint_action([LOGISTICS, EXPERIENCE], ROW))
    assert not set(metrics) & INTERNAL_DETAIL_KEYS
    assert all(isinstance(value, float) for value in metrics.values())
    assert metrics["ultimate/collaboration_success"] == 1.0
    assert metrics["_aggregate/required_slot_count"] == 11.0


@pytest.mark.parametrize("dash_agent", [0, 1])
def test_one_perfect_role_and_one_all_dash_role_gives_b_010(dash_agent):
    texts = [LOGISTICS, EXPERIENCE]
    texts[dash_agent] = all_dash_action_text(dash_agent, 3)
    detail = evaluate_joint_action(texts, ROW)
    assert detail[f"agent_{dash_agent}/required_grounded_contribution"] == 0.0
    assert detail[f"agent_{1 - dash_agent}/required_grounded_contribution"] == 1.0
    assert detail["required_cooperative_contribution"] == pytest.approx(0.2 * 0.5 + 0.8 * 0.0)
    assert detail["team_action_valid"] == 1.0  # syntactically perfect, yet no collaboration
    assert detail["ultimate/collaboration_success"] == 0.0


def test_all_dash_experience_still_verifies_its_optional_dashes():
    detail = evaluate_joint_action([LOGISTICS, all_dash_action_text(1, 3)], ROW)
    # 8 of the 12 experience slots are optional travel-day slots where "-" is valid
    assert detail["agent_1/verified_contribution"] == pytest.approx(8 / 12)


def test_lazy_agent_with_an_empty_list_contributes_nothing():
    detail = evaluate_joint_action([LOGISTICS, action(1, [])], ROW)
    assert detail["agent_1/verified_contribution"] == 0.0
    assert detail["agent_1/required_grounded_contribution"] == 0.0
    assert detail["agent_1/action_validity"] == 0.0
    assert detail["agent_1/count_fidelity"] == 0.0
    assert detail["required_cooperative_contribution"] == pytest.approx(0.1)
    assert detail["ultimate/required_plan_completion"] == 0.0
    assert detail["ultimate/collaboration_success"] == 0.0


def test_self_loop_cannot_erase_the_experience_requirements():
    looped = edited(VALID, {(2, "current_city"): "from Beta to Beta"})
    dashed = evaluate_joint_action([role_action_text(0, looped, 3), all_dash_action_text(1, 3)], ROW)
    assert dashed["_aggregate/required_slot_count"] == 11
    assert dashed["agent_1/required_grounded_contribution"] == 0.0
    assert dashed["required_cooperative_contribution"] <= 0.1
    working = evaluate_joint_action([role_action_text(0, looped, 3), EXPERIENCE], ROW)
    assert working["agent_1/required_grounded_contribution"] == 1.0
    assert working["agent_0/required_grounded_contribution"] == pytest.approx(6 / 7)
    assert working["ultimate/collaboration_success"] == 0.0


def test_empty_required_role_counts_as_zero_not_vacuous_success():
    # two travel days with a dated flight each: no stay day, so experience has no required slot
    reference = reference_information(three_day_records()).replace("2022-01-01", "2022-01-02")
    row = fixture_row(days=2, date=repr(["2022-01-02", "2022-01-03"]), reference_information=reference)
    assert [leg.kind for leg in row.scaffold] == ["move", "move"]
    plan = [
        {**VALID[0]},
        {**VALID[2], "day": 2},
    ]
    detail = evaluate_joint_action([role_action_text(0, plan, 2), all_dash_action_text(1, 2)], row)
    assert detail["agent_0/required_grounded_contribution"] == 1.0
    assert detail["agent_1/verified_contribution"] == 1.0  # every "-" is allowed
    assert detail["agent_1/required_grounded_contribution"] == 0.0
    assert detail["required_cooperative_contribution"] == pytest.approx(0.1)
    assert detail["ultimate/both_agent_required_grounded_contribution"] == 0.0


def test_extra_moves_do_not_shrink_the_teammate_work_surface():
    row = five_day_fixture_row()
    valid = valid_plan_values(row)
    honest_logistics = role_action_text(0, valid, 5)
    attack = edited(valid, {
        (2, "current_city"): "from Beta to Gamma", (2, "transportation"): "Flight Number: F200, from Beta to Gamma",
        (4, "current_city"): "from Gamma to Beta", (4, "transportation"): "Taxi, from Gamma to Beta",
    })
    attack_logistics = role_action_text(0, attack, 5)
    for experience in (all_dash_action_text(1, 5), role_action_text(1, valid, 5)):
        honest = evaluate_joint_action([honest_logistics, experience], row)
        attacked = evaluate_joint_action([attack_logistics, experience], row)
        assert attacked["route_scaffold_match_rate"] < honest["route_scaffold_match_rate"]
        assert attacked["required_grounded_recall"] <= honest["required_grounded_recall"]
        assert attacked["required_cooperative_contribution"] <= honest["required_cooperative_contribution"]
        assert attacked["agent_1/required_grounded_contribution"] == honest["agent_1/required_grounded_contribution"]
        assert attacked["_aggregate/required_slot_count"] == honest["_aggregate/required_slot_count"] == 20
    dashed = evaluate_joint_action([attack_logistics, all_dash_action_text(1, 5)], row)
    assert dashed["agent_1/required_grounded_contribution"] == 0.0


def test_conflicted_slot_is_not_a_verified_contribution():
    # logistics gives up its own final-day accommodation "-" to claim day-2 lunch: 9 items, within capacity
    logistics = [item for item in items_of(0, VALID, 3) if item[:2] != (3, "accommodation")]
    logistics.append((2, "lunch", "Brunch, Beta"))
    detail = evaluate_joint_action([action(0, logistics), EXPERIENCE], ROW)
    assert detail["conflict_count"] == 1.0
    assert detail["conflict_rate"] == pytest.approx(1 / 21)
    assert detail["ultimate/conflict_free"] == 0.0
    assert detail["agent_1/verified_contribution"] == pytest.approx(11 / 12)
    assert detail["agent_1/required_grounded_contribution"] == pytest.approx(3 / 4)
    assert detail["agent_0/ownership_precision"] == pytest.approx(8 / 9)
    assert detail["agent_0/action_validity"] == 0.0
    assert detail["team_action_valid"] == 0.0
    assert detail["merged_plan"][1]["lunch"] == "-"


def test_conflict_on_an_optional_slot_is_not_credited_even_though_the_empty_slot_is_valid():
    logistics = [item for item in items_of(0, VALID, 3) if item[:2] != (3, "accommodation")]
    logistics.append((1, "breakfast", "Cafe, Beta"))  # experience proposes "-" for this travel-day slot
    detail = evaluate_joint_action([action(0, logistics), EXPERIENCE], ROW)
    assert detail["conflict_count"] == 1.0
    assert detail["slot_validity"][(1, "breakfast")] is True  # left empty, and "-" is allowed there
    assert detail["agent_1/verified_contribution"] == pytest.approx(11 / 12)
    assert detail["agent_1/required_grounded_contribution"] == 1.0


def test_identical_proposal_is_an_overlap_and_keeps_the_owner_credit():
    logistics = [item for item in items_of(0, VALID, 3) if item[:2] != (3, "accommodation")]
    logistics.append((2, "lunch", "Diner, Beta"))
    detail = evaluate_joint_action([action(0, logistics), EXPERIENCE], ROW)
    assert detail["overlap_count"] == 1.0
    assert detail["overlap_rate"] == pytest.approx(1 / 21)
    assert detail["agent_1/verified_contribution"] == 1.0
    assert detail["team_action_valid"] == 0.0


@pytest.mark.parametrize(
    "agent_id, cell, value",
    [
        (1, (2, "lunch"), "Diner"),
        (0, (1, "transportation"), "F100"),
        (1, (2, "lunch"), "Diner, Beta - rated best in town, $15 total"),
        (0, (1, "transportation"), "Flight Number: F100, from Alpha to Beta, plus a free upgrade"),
    ],
)
def test_bare_abbreviated_or_embellished_values_earn_no_credit(agent_id, cell, value):
    plan = edited(VALID, {cell: value})
    texts = [LOGISTICS, EXPERIENCE]
    texts[agent_id] = role_action_text(agent_id, plan, 3)
    detail = evaluate_joint_action(texts, ROW)
    required_owned = 7 if agent_id == 0 else 4
    assert detail[f"agent_{agent_id}/required_grounded_contribution"] == pytest.approx(1 - 1 / required_owned)
    assert detail["ultimate/collaboration_success"] == 0.0
    assert detail["action_validity"] == 1.0  # the action itself is well formed


def test_over_capacity_action_is_dropped_and_counted():
    extra = items_of(0, VALID, 3) + [(2, "lunch", "Diner, Beta")]
    detail = evaluate_joint_action([action(0, extra), EXPERIENCE], ROW)
    assert detail["agent_0/capacity_valid"] == 0.0
    assert detail["agent_0/assignment_count"] == 0.0
    assert detail["agent_0/verified_contribution"] == 0.0
    assert detail["parser_error/capacity_exceeded"] == 1.0
    assert detail["invalid_action_rate"] == pytest.approx(1 / (10 + 12))


def test_non_strict_output_loses_team_success():
    fenced = "```json\n" + LOGISTICS + "\n```"
    detail = evaluate_joint_action([fenced, EXPERIENCE], ROW)
    assert detail["agent_0/strict_json"] == 0.0
    assert detail["agent_0/action_validity"] == 0.0
    assert detail["parser_error/not_strict_json"] == 1.0
    assert detail["ultimate/team_action_success"] == 0.0
    assert detail["ultimate/collaboration_success"] == 0.0
    assert detail["ultimate/reference_plan_success"] == 1.0  # the recovered plan itself is fine
    assert detail["action_validity"] == 0.5


def test_undecodable_text_is_a_failed_action_not_an_error():
    detail = evaluate_joint_action(["not json", EXPERIENCE], ROW)
    assert detail["agent_0/decode_success"] == 0.0
    assert detail["agent_0/soft_action_validity"] == 0.0
    assert detail["parser_error/decode_failed"] == 1.0
    assert detail["parser_error/any"] == 1.0
    assert detail["team_soft_action_validity"] == 0.0


def test_annotated_plan_cannot_change_joint_metrics():
    annotated = fixture_row(annotated_plan=repr([{"days": 2, "lunch": "Brunch, Beta"}]), gold_plan="[]")
    texts = [LOGISTICS, role_action_text(1, edited(VALID, {(2, "lunch"): "Brunch, Beta"}), 3)]
    first, second = evaluate_joint_action(texts, ROW), evaluate_joint_action(texts, annotated)
    assert scalar_metrics(first) == scalar_metrics(second)


def test_guards_reject_target_keys_and_non_scalar_ultimate_values():
    with pytest.raises(RuntimeError, match="gold_plan"):
        check_detail({"gold_plan_overlap": 1.0})
    with pytest.raises(RuntimeError, match="exact_match"):
        check_detail({"shaping/exact_match": 0.0})
    with pytest.raises(RuntimeError, match="ultimate/reference_plan_success"):
        check_detail({"ultimate/reference_plan_success": [1.0]})
    with pytest.raises(RuntimeError):
        check_detail({"ultimate/collaboration_success": True})
    check_detail({"ultimate/collaboration_success": 1.0, "slot_validity": {}})


def test_caller_errors_raise():
    with pytest.raises(ValueError, match="exactly 2 completions"):
        evaluate_joint_action([LOGISTICS], ROW)
    with pytest.raises(ValueError):
        evaluate_joint_action(LOGISTICS, ROW)


def test_bottleneck():
    assert bottleneck([1.0, 0.0]) == pytest.approx(0.1)
    assert bottleneck([0.5, 1.0]) == pytest.approx(0.2 * 0.75 + 0.8 * 0.5)
    assert bottleneck([]) == 0.0


_JSONISH = st.text(alphabet='{}[]":,0123456789 adfgilnostuvy-_\\\n', max_size=120)


@settings(max_examples=150, deadline=None)
@given(first=st.one_of(_JSONISH, st.text(max_size=80)), second=st.one_of(_JSONISH, st.text(max_size=80)))
def test_never_raises_on_model_text(first, second):
    detail = evaluate_joint_action([first, second], ROW)
    for key, value in scalar_metrics(detail).items():
        assert 0.0 <= value or key.startswith("_aggregate/"), key
    assert 0.0 <= detail["required_cooperative_contribution"] <= 1.0


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.sampled_from(["-", "Cafe, Beta", "Diner", "Museum, Beta", "Hotel, Beta", "x"]),
                       min_size=12, max_size=12))
def test_contributions_stay_within_unit_interval(values):
    items = [(day, field, value) for (day, field), value in zip(owned_slots(1, 3), values)]
    detail = evaluate_joint_action([LOGISTICS, action(1, items)], ROW)
    assert 0.0 <= detail["agent_1/verified_contribution"] <= 1.0
    assert detail["agent_0/required_grounded_contribution"] == 1.0
    # bottleneck with a perfect teammate: 0.2 * (1 + c) / 2 + 0.8 * c = 0.1 + 0.9 c
    expected = 0.1 + 0.9 * detail["agent_1/required_grounded_contribution"]
    assert detail["required_cooperative_contribution"] == pytest.approx(expected)
