"""Eval aggregation: per-sample records, micro ratios over global denominators, the 17 public names."""

from __future__ import annotations

import pytest

from tests.fixtures import all_dash_action_text, fixture_row, role_action_text, valid_plan_values
from travel.logging.eval_aggregation import (
    AGGREGATE_COUNT_KEYS,
    EVAL_METRIC_NAMES,
    HEADLINE_KEYS,
    aggregate_records,
    anchor_and_full_metrics,
    public_eval_metrics,
    sample_record,
)
from travel.reward import score_joint_action

# docs/reward.md "Evaluation metrics", in its order.
SEED_EVAL_NAMES = [
    "eval/reward", "eval/action_validity", "eval/team_action_success", "eval/required_cooperative_contribution",
    "eval/required_grounded_recall", "eval/entity_grounding_precision", "eval/grounding_f1",
    "eval/required_cost_completeness", "eval/reference_budget_soft", "eval/reference_budget_pass",
    "eval/route_scaffold_match", "eval/reference_plan_delivery", "eval/required_plan_completion",
    "eval/reference_commonsense_micro", "eval/reference_hard_micro", "eval/reference_plan_success",
    "eval/collaboration_success",
]  # fmt: skip
# The 15 headline keys of docs/reward.md "Evaluation aggregation".
REFERENCE_HEADLINE_KEYS = {
    "action_validity", "ultimate/team_action_success", "required_cooperative_contribution",
    "required_grounded_recall", "entity_grounding_precision", "required_cost_completeness",
    "budget_constraint_soft", "route_scaffold_match_rate", "ultimate/reference_plan_delivery",
    "ultimate/required_plan_completion", "ultimate/reference_commonsense_micro", "ultimate/reference_hard_micro",
    "ultimate/reference_budget_pass", "ultimate/reference_plan_success", "ultimate/collaboration_success",
}  # fmt: skip


def record(reward: float = 0.0, value: float = 0.0, **counts: float) -> dict[str, float]:
    """A hand-built sample record: every headline value `value`, counts as given (default 0)."""
    out = {"turn_1/reward_mean": reward, **{f"turn_1/{key}": value for key in HEADLINE_KEYS}}
    out.update({f"_aggregate/{name}": float(counts.get(name, 0.0)) for name in AGGREGATE_COUNT_KEYS})
    return out


def test_names_follow_seed_and_reference():
    assert list(EVAL_METRIC_NAMES) == SEED_EVAL_NAMES
    assert set(HEADLINE_KEYS) == REFERENCE_HEADLINE_KEYS and len(HEADLINE_KEYS) == 15


def test_sample_record_from_a_scored_joint_action():
    row = fixture_row()
    plan = valid_plan_values(row)
    result = score_joint_action(row, [role_action_text(0, plan, 3), all_dash_action_text(1, 3)])
    rec = sample_record(result)
    assert rec == sample_record(result.metrics)
    assert rec["turn_1/reward_mean"] == result.reward
    assert len(rec) == 1 + 15 + 10
    assert rec["turn_1/route_scaffold_match_rate"] == result.metrics["route_scaffold_match"]
    assert rec["_aggregate/required_slot_count"] == 11.0


def test_sample_record_refuses_a_missing_metric():
    metrics = dict(score_joint_action(fixture_row(), ["", ""]).metrics)
    del metrics["_aggregate/hard_pass_count"]
    with pytest.raises(KeyError, match="hard_pass_count"):
        sample_record(metrics)
    metrics = dict(score_joint_action(fixture_row(), ["", ""]).metrics)
    del metrics["budget_constraint_soft"]
    with pytest.raises(KeyError, match="budget_constraint_soft"):
        sample_record(metrics)


def test_micro_metrics_use_global_denominators():
    # Sample A: hard 2/2, recall 1/1, precision 8/8, cost 1/2. Sample B: hard 0/3, recall 4/9,
    # precision 0/2, cost 18/18. Globally: hard 2/5, recall 5/10, precision 8/10, cost 19/20.
    a = record(1.0, 1.0, hard_pass_count=2, hard_applicable_count=2, required_valid_count=1, required_slot_count=1,
               grounded_entity_count=8, predicted_entity_count=8, required_cost_known_count=1,
               required_cost_slot_count=2, commonsense_pass_count=8, commonsense_applicable_count=8)  # fmt: skip
    b = record(0.0, 0.0, hard_pass_count=0, hard_applicable_count=3, required_valid_count=4, required_slot_count=9,
               grounded_entity_count=0, predicted_entity_count=2, required_cost_known_count=18,
               required_cost_slot_count=18, commonsense_pass_count=2, commonsense_applicable_count=8)  # fmt: skip
    aggregate = aggregate_records([a, b])
    assert aggregate["ultimate/reference_hard_micro"] == pytest.approx(0.4)
    assert aggregate["required_grounded_recall"] == pytest.approx(0.5)
    assert aggregate["entity_grounding_precision"] == pytest.approx(0.8)
    assert aggregate["required_cost_completeness"] == pytest.approx(19 / 20)
    assert aggregate["grounding_f1"] == pytest.approx(8 / 13)
    assert aggregate["ultimate/reference_commonsense_micro"] == pytest.approx(10 / 16)
    # Non-micro headline values are plain means.
    assert aggregate["action_validity"] == pytest.approx(0.5)
    assert aggregate["reward_mean"] == pytest.approx(0.5)
    assert not any(key.startswith("_aggregate") for key in aggregate)


def test_zero_denominators_give_zero_and_f1_needs_both_parts():
    aggregate = aggregate_records([record(0.3, 1.0, hard_pass_count=1, hard_applicable_count=1)])
    assert aggregate["entity_grounding_precision"] == 0.0
    assert aggregate["grounding_f1"] == 0.0
    assert aggregate["ultimate/reference_hard_micro"] == 1.0


def test_public_names_map_the_aggregate():
    aggregate = aggregate_records([record(0.25, 1.0, hard_pass_count=1, hard_applicable_count=1,
                                          required_valid_count=1, required_slot_count=1, grounded_entity_count=1,
                                          predicted_entity_count=1, required_cost_known_count=1,
                                          required_cost_slot_count=1, commonsense_pass_count=1,
                                          commonsense_applicable_count=1)])  # fmt: skip
    public = public_eval_metrics(aggregate)
    assert list(public) == SEED_EVAL_NAMES
    assert public["eval/reward"] == 0.25
    assert all(public[name] == 1.0 for name in SEED_EVAL_NAMES[1:])
    assert list(public_eval_metrics(aggregate, "eval_full")) == [n.replace("eval/", "eval_full/") for n in SEED_EVAL_NAMES]


def test_anchor_panel_and_full_pool_are_separate():
    counts = dict(required_valid_count=1, required_slot_count=1)
    anchor = [record(0.05, 0.2, **counts) for _ in range(4)]
    rest = [record(0.9875, 0.575, **counts) for _ in range(16)]
    metrics = anchor_and_full_metrics(anchor + rest, panel_size=4)
    assert metrics["eval/reward"] == pytest.approx(0.05)
    assert metrics["eval/action_validity"] == pytest.approx(0.2)
    assert metrics["eval_full/reward"] == pytest.approx(0.8)
    assert metrics["eval_full/action_validity"] == pytest.approx(0.5)
    assert len(metrics) == 34
    only_anchor = anchor_and_full_metrics(anchor, panel_size=4)
    assert set(only_anchor) == set(SEED_EVAL_NAMES)


def test_end_to_end_aggregate_of_scored_rows():
    row = fixture_row()
    plan = valid_plan_values(row)
    valid = [role_action_text(0, plan, 3), role_action_text(1, plan, 3)]
    dash = [all_dash_action_text(0, 3), all_dash_action_text(1, 3)]
    results = [score_joint_action(row, valid), score_joint_action(row, dash)]
    metrics = anchor_and_full_metrics([sample_record(r) for r in results], panel_size=4)
    assert metrics["eval/reward"] == pytest.approx((1.0 + 0.08) / 2)
    assert metrics["eval/required_grounded_recall"] == pytest.approx(11 / 22)  # 11 + 0 of 11 + 11 required
    assert metrics["eval/collaboration_success"] == pytest.approx(0.5)


def test_empty_inputs_are_rejected():
    with pytest.raises(ValueError):
        aggregate_records([])
    with pytest.raises(ValueError):
        anchor_and_full_metrics([record()], panel_size=0)
