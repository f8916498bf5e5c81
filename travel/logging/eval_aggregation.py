"""Evaluation aggregation: per-sample records, micro-averaged aggregates and the 17 public eval/* names.

A sample record holds the 15 headline `turn_1/*` values of one scored joint action, its reward as
`turn_1/reward_mean`, and the `_aggregate/*` counts. Aggregating averages the headline values, then
replaces the micro metrics with ratios of summed counts (global denominators, so a row with many
required slots weighs more than one with few) and recomputes grounding F1 from the aggregated
precision and recall. `public_eval_metrics` maps an aggregate to the compact W&B surface.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from travel.reward import PUBLIC_METRIC_SOURCES

# The public surface, in the order of docs/reward.md "Evaluation metrics".
EVAL_METRIC_NAMES: tuple[str, ...] = (
    "eval/reward",
    "eval/action_validity",
    "eval/team_action_success",
    "eval/required_cooperative_contribution",
    "eval/required_grounded_recall",
    "eval/entity_grounding_precision",
    "eval/grounding_f1",
    "eval/required_cost_completeness",
    "eval/reference_budget_soft",
    "eval/reference_budget_pass",
    "eval/route_scaffold_match",
    "eval/reference_plan_delivery",
    "eval/required_plan_completion",
    "eval/reference_commonsense_micro",
    "eval/reference_hard_micro",
    "eval/reference_plan_success",
    "eval/collaboration_success",
)
# The 15 per-sample headline keys (docs/reward.md "Evaluation aggregation"); reward and grounding_f1 are
# handled separately.
HEADLINE_KEYS: tuple[str, ...] = tuple(
    source for name, source in PUBLIC_METRIC_SOURCES.items() if name not in ("reward", "grounding_f1")
)
AGGREGATE_COUNT_KEYS: tuple[str, ...] = (
    "commonsense_pass_count",
    "commonsense_applicable_count",
    "hard_pass_count",
    "hard_applicable_count",
    "required_valid_count",
    "required_slot_count",
    "grounded_entity_count",
    "predicted_entity_count",
    "required_cost_known_count",
    "required_cost_slot_count",
)
# headline key <- (numerator count, denominator count)
MICRO_RATIOS: dict[str, tuple[str, str]] = {
    "ultimate/reference_commonsense_micro": ("commonsense_pass_count", "commonsense_applicable_count"),
    "ultimate/reference_hard_micro": ("hard_pass_count", "hard_applicable_count"),
    "required_grounded_recall": ("required_valid_count", "required_slot_count"),
    "entity_grounding_precision": ("grounded_entity_count", "predicted_entity_count"),
    "required_cost_completeness": ("required_cost_known_count", "required_cost_slot_count"),
}
TURN_PREFIX, COUNT_PREFIX = "turn_1/", "_aggregate/"
REWARD_KEY = "turn_1/reward_mean"


def _number(value: Any, key: str) -> float:
    if isinstance(value, bool) or isinstance(value, (int, float)):
        number = float(value)
        if math.isfinite(number):
            return number
    raise ValueError(f"eval metric {key!r} must be a finite number, got {value!r}")


def sample_record(metrics: Mapping[str, Any] | Any) -> dict[str, float]:
    """The aggregation record of one scored joint action (a RewardResult or its metrics mapping).
    A missing headline key or count raises KeyError naming it: a sample is never silently dropped."""
    metrics = getattr(metrics, "metrics", metrics)
    record: dict[str, float] = {}
    for key in ("reward", *HEADLINE_KEYS):
        if key not in metrics:
            raise KeyError(f"scored sample lacks metric {key!r}")
    record[REWARD_KEY] = _number(metrics["reward"], "reward")
    for key in HEADLINE_KEYS:
        record[TURN_PREFIX + key] = _number(metrics[key], key)
    for count in AGGREGATE_COUNT_KEYS:
        key = COUNT_PREFIX + count
        if key not in metrics:
            raise KeyError(f"scored sample lacks count {key!r}")
        record[key] = _number(metrics[key], key)
    return record


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else 0.0


def harmonic_mean(precision: float, recall: float) -> float:
    return 0.0 if precision <= 0 or recall <= 0 else 2 * precision * recall / (precision + recall)


def aggregate_records(records: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Mean of every `turn_1/*` value, micro metrics as ratios of summed counts, grounding F1 recomputed.
    Returns keys without the `turn_1/` prefix (plus `reward_mean`); counts are not returned."""
    if not records:
        raise ValueError("cannot aggregate an empty list of eval samples")
    keys = [key for key in records[0] if key.startswith(TURN_PREFIX)]
    aggregate = {
        key[len(TURN_PREFIX) :]: math.fsum(_number(r[key], key) for r in records) / len(records) for key in keys
    }
    totals = {count: math.fsum(r[COUNT_PREFIX + count] for r in records) for count in AGGREGATE_COUNT_KEYS}
    for key, (numerator, denominator) in MICRO_RATIOS.items():
        aggregate[key] = _ratio(totals[numerator], totals[denominator])
    aggregate["grounding_f1"] = harmonic_mean(aggregate["entity_grounding_precision"], aggregate["required_grounded_recall"])
    return aggregate


def public_eval_metrics(aggregate: Mapping[str, float], namespace: str = "eval") -> dict[str, float]:
    """The 17 public names under `namespace/` (eval or eval_full) from an aggregate."""
    out = {}
    for name in EVAL_METRIC_NAMES:
        public = name.split("/", 1)[1]
        source = "reward_mean" if public == "reward" else PUBLIC_METRIC_SOURCES[public]
        out[f"{namespace}/{public}"] = float(aggregate[source])
    return out


def anchor_and_full_metrics(records: Sequence[Mapping[str, float]], panel_size: int) -> dict[str, float]:
    """The first `panel_size` records (the fixed anchor panel) under eval/*; when more were evaluated
    (the terminal evaluation), all of them under eval_full/* as well."""
    if panel_size < 1:
        raise ValueError(f"panel_size must be >= 1, got {panel_size}")
    if not records:
        raise ValueError("no eval samples to aggregate")
    metrics = public_eval_metrics(aggregate_records(records[:panel_size]), "eval")
    if len(records) > panel_size:
        metrics.update(public_eval_metrics(aggregate_records(records), "eval_full"))
    return metrics
