"""The shared reward on joint actions: docs/reward.md "Reward formula" and its "Reference values", batch scoring."""

from __future__ import annotations

import json
import math

import pytest

from tests import fixtures as fx
from tests.fixtures import (
    all_dash_action_text,
    five_day_fixture_row,
    fixture_raw,
    fixture_row,
    role_action_text,
    valid_plan_values,
)
from travel.data.normalise import normalise_row
from travel.reward import (
    PUBLIC_METRIC_NAMES,
    REWARD_BACKEND,
    RewardConfig,
    score_joint_action,
    score_joint_actions,
)
from travel.reward.formula import COMPONENT_NAMES, PENALTY_NAMES

SEED_PUBLIC_NAMES = (
    "reward", "action_validity", "team_action_success", "required_cooperative_contribution",
    "required_grounded_recall", "entity_grounding_precision", "grounding_f1", "required_cost_completeness",
    "reference_budget_soft", "reference_budget_pass", "route_scaffold_match", "reference_plan_delivery",
    "required_plan_completion", "reference_commonsense_micro", "reference_hard_micro", "reference_plan_success",
    "collaboration_success",
)  # fmt: skip
STRICT_METRICS = ("action_validity", "team_action_success", "required_cooperative_contribution",
                  "required_grounded_recall", "collaboration_success", "reference_plan_success")  # fmt: skip


def texts_for(row, plan) -> list[str]:
    return [role_action_text(0, plan, row.days), role_action_text(1, plan, row.days)]


def dash(row, agent_id: int) -> str:
    return all_dash_action_text(agent_id, row.days)


def components(result) -> float:
    return math.fsum(result.metrics[f"reward_component/{name}"] for name in COMPONENT_NAMES)


def penalties(result) -> float:
    return math.fsum(result.metrics[f"reward_penalty/{name}"] for name in PENALTY_NAMES)


@pytest.fixture(scope="module")
def row():
    return fixture_row()


@pytest.fixture(scope="module")
def plan(row):
    return valid_plan_values(row)


@pytest.fixture(scope="module")
def valid(row, plan):
    return texts_for(row, plan)


# ---- golden values (docs/reward.md "Reference values") ----------------------------------------------


def test_valid_plan_scores_exactly_one_with_every_end_metric(row, valid):
    result = score_joint_action(row, valid)
    assert result.reward == 1.0
    assert result.backend == REWARD_BACKEND == "reference_constraint_learnable_budget_dense"
    assert result.details["reward_backend"] == REWARD_BACKEND
    ultimate = {k: v for k, v in result.metrics.items() if k.startswith("ultimate/")}
    assert ultimate and all(v == 1.0 for v in ultimate.values()), ultimate
    assert all(result.metrics[name] == 1.0 for name in SEED_PUBLIC_NAMES)
    assert not [k for k in result.details if "exact_match" in k or "slot_quality" in k]


def test_result_exposes_the_17_public_metrics_as_floats(row, valid):
    result = score_joint_action(row, [dash(row, 0), valid[1]])
    assert PUBLIC_METRIC_NAMES == SEED_PUBLIC_NAMES
    assert set(SEED_PUBLIC_NAMES) <= set(result.metrics)
    assert all(type(v) is float and math.isfinite(v) for v in result.metrics.values())


def test_two_different_valid_plans_both_score_one(row, plan):
    other = [dict(day) for day in plan]
    other[0]["accommodation"] = other[1]["accommodation"] = "Motel, Beta"
    other[1].update(breakfast="Brunch, Beta", attraction="Park, Beta", lunch="Cafe, Beta", dinner="Diner, Beta")
    assert other != plan
    assert score_joint_action(row, texts_for(row, plan)).reward == 1.0
    assert score_joint_action(row, texts_for(row, other)).reward == 1.0


def test_annotated_plan_cannot_change_the_score(plan):
    clean = fixture_row()
    wrong_plan = repr([{"days": 1, "current_city": "from Alpha to Gamma", "transportation": "Flight Number: F999"}])
    annotated = normalise_row(fixture_raw(annotated_plan=wrong_plan, gold_plan=wrong_plan), 0)
    for texts in (texts_for(clean, plan), [dash(clean, 0), dash(clean, 1)], ["oops", texts_for(clean, plan)[1]]):
        a, b = score_joint_action(clean, texts), score_joint_action(annotated, texts)
        assert a.reward == b.reward and a.metrics == b.metrics


def test_strict_all_dash_is_exactly_0_08(row):
    result = score_joint_action(row, [dash(row, 0), dash(row, 1)])
    assert result.reward == 0.08
    m = result.metrics
    assert (m["reward_component/protocol_progress"], m["reward_component/action_validity"],
            m["reward_component/team_action"]) == (0.02, 0.04, 0.02)  # fmt: skip
    assert m["required_cooperative_contribution"] == 0.0 and m["required_grounded_recall"] == 0.0
    assert m["reference_plan_delivery"] == 0.0


@pytest.mark.parametrize("malformed_agent", [0, 1])
def test_one_malformed_agent_is_capped_at_0_07(row, valid, malformed_agent):
    texts = list(valid)
    texts[malformed_agent] = "Here is my action: " + texts[malformed_agent]
    result = score_joint_action(row, texts)
    assert components(result) <= 0.07 + 1e-12
    assert result.reward <= 0.07
    assert result.metrics["team_action_success"] == 0.0
    assert result.metrics["reward_component/recovered_semantic"] <= 0.03


def test_two_malformed_agents_are_capped_at_0_05(row, valid):
    result = score_joint_action(row, ["Sure! " + valid[0], "```json\n" + valid[1] + "\n```"])
    assert components(result) <= 0.05 + 1e-12
    assert result.reward <= 0.05
    assert result.metrics["action_validity"] == 0.0


def test_route_only_plan_is_far_below_a_valid_plan(row, valid):
    route_only = score_joint_action(row, [valid[0], dash(row, 1)]).reward
    assert route_only < 0.75
    assert score_joint_action(row, valid).reward - route_only > 0.30


@pytest.mark.parametrize("lazy_agent", [0, 1])
def test_strict_all_dash_role_caps_the_team(row, valid, lazy_agent):
    texts = list(valid)
    texts[lazy_agent] = dash(row, lazy_agent)
    result = score_joint_action(row, texts)
    assert result.metrics[f"agent_{lazy_agent}/required_grounded_contribution"] == 0.0
    assert result.metrics["required_cooperative_contribution"] <= 0.10 + 1e-12
    assert result.reward < 0.30


def test_self_loop_cannot_erase_the_experience_requirements(row, plan):
    looped = [dict(day) for day in plan]
    looped[1]["current_city"] = "from Beta to Beta"
    result = score_joint_action(row, [role_action_text(0, looped, row.days), dash(row, 1)])
    assert result.metrics["agent_1/required_grounded_contribution"] == 0.0
    assert result.reward < 0.25


def test_an_empty_assignment_list_is_no_contribution(row, valid):
    result = score_joint_action(row, [valid[0], json.dumps({"agent_id": 1, "assignments": []})])
    assert result.metrics["agent_1/required_grounded_contribution"] == 0.0
    assert result.reward < 0.25


def test_a_role_with_no_required_slots_contributes_zero_not_one():
    # Two travel days: the scaffold leaves the experience role nothing required.
    records = [
        fx.attractions_record("Beta", ["Museum"]),
        fx.restaurants_record("Beta", [("Cafe", 10, "Indian")]),
        fx.accommodations_record("Beta", [("Hotel", 100, "Private room", "No parties", 1, 2)]),
        fx.flight_record("Alpha", "Beta", "2022-01-01", [("F100", 20)]),
        fx.flight_record("Beta", "Alpha", "2022-01-02", [("F200", 25)]),
    ]
    row = normalise_row(
        fixture_raw(days=2, date=repr(["2022-01-01", "2022-01-02"]), reference_information=fx.reference_information(records)),
        7,
    )
    assert not any(field in ("breakfast", "attraction", "lunch", "dinner") for _, field in row.required_slots)
    plan = [{"day": d, **{f: "-" for f in fx.PLAN_FIELDS}} for d in (1, 2)]
    plan[0].update(current_city="from Alpha to Beta", transportation="Flight Number: F100, from Alpha to Beta",
                   accommodation="Hotel, Beta")  # fmt: skip
    plan[1].update(current_city="from Beta to Alpha", transportation="Flight Number: F200, from Beta to Alpha")
    result = score_joint_action(row, texts_for(row, plan))
    assert result.metrics["agent_1/required_grounded_contribution"] == 0.0
    assert result.metrics["required_cooperative_contribution"] == pytest.approx(0.10)
    assert result.reward < 0.5


def test_five_day_extra_moves_cannot_shrink_the_teammates_work():
    row = five_day_fixture_row()
    plan = valid_plan_values(row)
    honest = score_joint_action(row, [role_action_text(0, plan, 5), dash(row, 1)])
    attack_plan = [dict(day) for day in plan]  # stay days 2 and 4 become moves, so "-" meals look fine
    attack_plan[1].update(current_city="from Beta to Gamma", transportation="Flight Number: F200, from Beta to Gamma",
                          accommodation="Hotel, Gamma")  # fmt: skip
    attack_plan[2].update(current_city="from Gamma to Beta", transportation="Taxi, from Gamma to Beta",
                          accommodation="Hotel, Beta")  # fmt: skip
    attack_plan[3].update(current_city="from Beta to Alpha", transportation="Taxi, from Beta to Alpha", accommodation="-")
    attack = score_joint_action(row, [role_action_text(0, attack_plan, 5), dash(row, 1)])
    assert attack.metrics["route_scaffold_match"] < honest.metrics["route_scaffold_match"]
    assert attack.metrics["required_grounded_recall"] <= honest.metrics["required_grounded_recall"]
    assert attack.metrics["required_cooperative_contribution"] <= honest.metrics["required_cooperative_contribution"]
    assert attack.reward < honest.reward


def _python_literal_without_closing_bracket(row, plan, agent_id: int) -> str:
    action = json.loads(role_action_text(agent_id, plan, row.days))
    return repr(action)[:-2] + "}"  # "...}]}" -> "...}}": neither JSON nor a Python literal


def test_triple_recovery_gives_bounded_credit_and_no_strict_metric(row, plan):
    texts = [_python_literal_without_closing_bracket(row, plan, a) for a in (0, 1)]
    result = score_joint_action(row, texts)
    assert 0.0 < result.reward < 0.5
    assert all(result.metrics[name] == 0.0 for name in STRICT_METRICS)
    assert result.metrics["reference_plan_delivery"] == 0.0
    assert result.metrics["shaping/agent_0/owned_triple_progress"] == 1.0
    assert 0.0 < result.metrics["reward_component/recovered_semantic"] <= 0.03


def test_a_single_recovered_triple_is_bounded_and_bare_names_do_not_ground(row):
    grounded = 'junk {"day": 2, "field": "attraction", "value": "Museum, Beta"'
    bare = 'junk {"day": 2, "field": "attraction", "value": "Museum"'
    logistics = "junk"
    with_city = score_joint_action(row, [logistics, grounded])
    without_city = score_joint_action(row, [logistics, bare])
    for result in (with_city, without_city):
        assert result.metrics["reward_component/recovered_semantic"] <= 0.03
        assert all(result.metrics[name] == 0.0 for name in STRICT_METRICS)
    assert with_city.metrics["shaping/recovered/required_grounded_recall"] > 0.0
    assert without_city.metrics["shaping/recovered/required_grounded_recall"] == 0.0


def test_detached_value_spam_earns_nothing(row):
    spam = '"value": "Museum, Beta", ' * 40
    assert score_joint_action(row, [spam, spam]).reward < 0.005


def test_grounded_malformed_progress_beats_ungrounded_within_0_05(row, plan):
    invented = [{**day, **{f: f"Nowhere {i}, Beta" for i, f in enumerate(("breakfast", "attraction", "lunch", "dinner", "accommodation"))}}
                for day in plan]  # fmt: skip
    grounded = score_joint_action(row, ["Plan: " + t for t in texts_for(row, plan)])
    ungrounded = score_joint_action(row, ["Plan: " + t for t in texts_for(row, invented)])
    assert ungrounded.reward < grounded.reward <= 0.05


def test_all_dash_below_hallucinated_below_valid(row, plan, valid):
    invented = [dict(day) for day in plan]
    invented[1].update(breakfast="Ghost Cafe, Beta", lunch="Ghost Diner, Beta", dinner="Ghost Bistro, Beta")
    all_dash = score_joint_action(row, [dash(row, 0), dash(row, 1)])
    hallucinated = score_joint_action(row, texts_for(row, invented))
    assert all_dash.reward < hallucinated.reward < score_joint_action(row, valid).reward
    assert all_dash.metrics["reference_plan_delivery"] == 0.0
    assert hallucinated.metrics["reference_plan_delivery"] == 1.0


def test_one_extra_assignment_drops_the_action_but_keeps_recovered_credit(row, valid):
    action = json.loads(valid[0])
    action["assignments"].append({"day": 1, "field": "current_city", "value": "from Alpha to Beta"})
    result = score_joint_action(row, [json.dumps(action), valid[1]])
    assert 0.0 < result.reward < 0.5
    assert result.metrics["agent_0/required_grounded_contribution"] == 0.0
    assert result.metrics["shaping/agent_0/recovered_required_contribution"] > 0.9
    assert result.metrics["reward_penalty/invalid_action"] > 0.0


def test_copy_and_overlong_penalties_fire(row, valid):
    copied = score_joint_action(row, [valid[0] + row.reference_information[:3000], valid[1]])
    assert copied.metrics["reward_penalty/reference_copy"] > 0.0
    padded_action = json.dumps(json.loads(valid[0]), indent=40)  # still a strict action, just very long
    padded = score_joint_action(row, [padded_action, valid[1]])
    overlong = (len(padded_action) - (240 + 180 * 9)) / (240 + 180 * 9)
    assert padded.metrics["action_validity"] == 1.0
    assert padded.metrics["reward_penalty/overlong"] == pytest.approx(0.05 * min(1.0, overlong))
    assert padded.reward == pytest.approx(1.0 - 0.05 * min(1.0, overlong))


def test_component_accounting_adds_up(row, plan, valid):
    scenarios = [
        valid,
        [dash(row, 0), dash(row, 1)],
        [valid[0], dash(row, 1)],
        ["Plan: " + valid[0], valid[1][:200]],
        [valid[0] + row.reference_information[:4000], "x" * 5000],
        [_python_literal_without_closing_bracket(row, plan, 0), valid[1]],
    ]
    for texts in scenarios:
        result = score_joint_action(row, texts)
        unclamped = result.metrics["unclamped_reward"]
        assert unclamped == pytest.approx(components(result) - penalties(result), abs=1e-12)
        assert result.reward == pytest.approx(min(1.0, max(-0.25, unclamped)), abs=1e-12)
        assert result.metrics["reward_component/recovered_semantic"] <= 0.03


def test_conflicting_and_overlapping_slots_are_penalised(row, valid):
    experience = json.loads(valid[1])
    logistics = json.loads(valid[0])
    # Logistics also proposes day-2 breakfast: once identical (overlap), once different (conflict).
    for value, penalty in (("Cafe, Beta", "overlap"), ("Diner, Beta", "conflict")):
        extra = dict(logistics, assignments=logistics["assignments"][:-1] + [{"day": 2, "field": "breakfast", "value": value}])
        result = score_joint_action(row, [json.dumps(extra), json.dumps(experience)])
        assert result.metrics[f"reward_penalty/{penalty}"] == pytest.approx(0.05 / 21)


@pytest.mark.parametrize("budget, margin, passed", [(290, 1.0, 1.0), (250, 0.84, 0.0), (145, 0.0, 0.0)])
def test_budget_golden_values(plan, budget, margin, passed):
    row = fixture_row(budget=budget)
    result = score_joint_action(row, texts_for(row, plan))
    assert result.metrics["estimated_cost"] == pytest.approx(290.0)
    assert result.metrics["budget_margin_score"] == pytest.approx(margin)
    assert result.metrics["reference_budget_pass"] == passed
    assert (result.reward == 1.0) is (passed == 1.0)


def test_required_slot_golden_counts(row, valid):
    result = score_joint_action(row, valid)
    assert result.metrics["_aggregate/required_slot_count"] == 11.0
    assert result.metrics["_aggregate/required_cost_slot_count"] == 7.0


def test_unknown_required_lunch_golden_values(plan):
    row = fixture_row(budget=290)
    broken = [dict(day) for day in plan]
    broken[1]["lunch"] = "Unknown Diner, Beta"
    m = score_joint_action(row, texts_for(row, broken)).metrics
    assert m["required_cost_completeness"] == pytest.approx(6 / 7)
    assert m["required_grounded_recall"] == pytest.approx(10 / 11)
    assert m["reference_budget_soft"] == pytest.approx(60 / 77)
    assert m["reference_budget_pass"] == 0.0


# ---- batch scoring ---------------------------------------------------------------------------------


def test_batch_scoring_matches_single_scoring_and_is_pure(row, valid):
    pairs = [valid, [dash(row, 0), dash(row, 1)], valid, ["Plan: " + valid[0], valid[1][:300]], valid]
    batch = score_joint_actions(row, pairs)
    assert [r.reward for r in batch] == [score_joint_action(row, p).reward for p in pairs]
    assert [r.metrics for r in batch] == [score_joint_action(row, p).metrics for p in pairs]


def test_repeated_joint_actions_get_independent_results(row, valid):
    first, second = score_joint_actions(row, [valid, valid])
    assert first.metrics == second.metrics and first.metrics is not second.metrics


def test_config_changes_the_reward_but_not_the_end_metrics(row, valid):
    texts = [valid[0], dash(row, 1)]
    default = score_joint_action(row, texts)
    heavier = {"strict_quality_weight": 0.47, "final_success_bonus": 0.20}
    reweighted = score_joint_action(row, texts, heavier)
    assert reweighted.reward != default.reward
    assert reweighted.reward == score_joint_action(row, texts, RewardConfig(**heavier)).reward
    for name in SEED_PUBLIC_NAMES[1:]:
        assert reweighted.metrics[name] == default.metrics[name], name


def test_non_string_model_output_is_scored_not_raised(row):
    for texts in ([None, 7], [b"\xff\xfe", {"agent_id": 1}], ["", ""]):
        result = score_joint_action(row, texts)
        assert -0.25 <= result.reward <= 1.0


def test_a_joint_action_must_have_two_texts(row):
    with pytest.raises(ValueError, match="exactly two"):
        score_joint_action(row, ["only one"])
