"""The shared reward: `score_joint_action(row, [logistics_text, experience_text]) -> RewardResult`.

One scalar per joint action, computed from the reward-independent joint evaluation (strict merge,
plan evaluator, per-role metrics), the reward-only recovery surface and the formula in
`travel.reward.formula`. Scoring is pure and never raises on model text. The evaluator modules are
imported on first use so that importing this package (e.g. for RewardConfig in a Hydra config) stays
cheap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from travel.reward.formula import REWARD_BACKEND, RewardConfig, compute_reward, reward_signals
from travel.reward.joint import INTERNAL_DETAIL_KEYS, MERGE_RESULT_KEY, evaluate_joint_action
from travel.reward.recovery import RecoveryMemo, build_recovery_surface

if TYPE_CHECKING:
    from travel.data.row import TravelRow

__all__ = [
    "PUBLIC_METRIC_NAMES",
    "PUBLIC_METRIC_SOURCES",
    "REWARD_BACKEND",
    "REWARD_RANGE",
    "RewardConfig",
    "RewardResult",
    "score_joint_action",
    "score_joint_actions",
]

DEFAULT_CONFIG = RewardConfig()
REWARD_RANGE: tuple[float, float] = DEFAULT_CONFIG.reward_range

# The 17 public end metrics (in the order of docs/reward.md "Evaluation metrics", without the eval/ prefix)
# and the detail key behind each.
PUBLIC_METRIC_SOURCES: dict[str, str] = {
    "reward": "reward",
    "action_validity": "action_validity",
    "team_action_success": "ultimate/team_action_success",
    "required_cooperative_contribution": "required_cooperative_contribution",
    "required_grounded_recall": "required_grounded_recall",
    "entity_grounding_precision": "entity_grounding_precision",
    "grounding_f1": "grounding_f1",
    "required_cost_completeness": "required_cost_completeness",
    "reference_budget_soft": "budget_constraint_soft",
    "reference_budget_pass": "ultimate/reference_budget_pass",
    "route_scaffold_match": "route_scaffold_match_rate",
    "reference_plan_delivery": "ultimate/reference_plan_delivery",
    "required_plan_completion": "ultimate/required_plan_completion",
    "reference_commonsense_micro": "ultimate/reference_commonsense_micro",
    "reference_hard_micro": "ultimate/reference_hard_micro",
    "reference_plan_success": "ultimate/reference_plan_success",
    "collaboration_success": "ultimate/collaboration_success",
}
PUBLIC_METRIC_NAMES: tuple[str, ...] = tuple(PUBLIC_METRIC_SOURCES)


@dataclass(frozen=True)
class RewardResult:
    """One scored joint action. `metrics` holds every numeric detail (floats), including the 17 public
    names; `details` additionally keeps the non-numeric diagnostics (merged plan, parser errors)."""

    reward: float
    metrics: dict[str, float]
    details: dict[str, Any] = field(default_factory=dict, repr=False)
    backend: str = REWARD_BACKEND


def score_joint_action(
    row: "TravelRow", texts: Sequence[Any], config: RewardConfig | Mapping[str, Any] | None = None
) -> RewardResult:
    """Score one joint action: texts = [logistics action text, experience action text]."""
    return score_joint_actions(row, [texts], config)[0]


def score_joint_actions(
    row: "TravelRow", pairs: Iterable[Sequence[Any]], config: RewardConfig | Mapping[str, Any] | None = None
) -> list[RewardResult]:
    """Score the K joint actions of one row, sharing per-row work: identical joint actions are scored
    once, and repeated agent texts and recovered plans are recovered and evaluated once. Every
    returned result owns its dicts."""

    if config is None:
        config = DEFAULT_CONFIG
    elif not isinstance(config, RewardConfig):
        config = RewardConfig.from_mapping(config)
    results: dict[tuple[str, ...], RewardResult] = {}
    memo = RecoveryMemo()
    out = []
    for pair in pairs:
        texts = _joint_texts(pair)
        result = results.get(texts)
        if result is None:
            result = results[texts] = _score(row, texts, config, memo)
        else:
            result = RewardResult(result.reward, dict(result.metrics), dict(result.details), result.backend)
        out.append(result)
    return out


def _as_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if completion is None:
        return ""
    if isinstance(completion, (bytes, bytearray)):
        return bytes(completion).decode("utf-8", errors="replace")
    try:
        return str(completion)
    except Exception:  # an object whose __str__ fails is just unreadable text
        return ""


def _joint_texts(pair: Sequence[Any]) -> tuple[str, ...]:
    if isinstance(pair, (str, bytes)) or len(pair) != 2:
        raise ValueError("a joint action is exactly two texts: [logistics action, experience action]")
    return tuple(_as_text(text) for text in pair)


def _score(row: "TravelRow", texts: tuple[str, ...], config: RewardConfig, memo: Any) -> RewardResult:
    detail = evaluate_joint_action(list(texts), row)
    merge = detail[MERGE_RESULT_KEY]
    surface = build_recovery_surface(texts, row, merge, detail, memo)
    reward, formula_detail = compute_reward(reward_signals(detail, surface, config), config)

    metrics: dict[str, float] = {
        key: float(value)
        for key, value in detail.items()
        if key not in INTERNAL_DETAIL_KEYS and isinstance(value, (int, float))
    }
    metrics.update(surface.details())
    metrics.update(formula_detail)
    for public, source in PUBLIC_METRIC_SOURCES.items():
        metrics[public] = metrics[source]
    details: dict[str, Any] = dict(metrics)
    details.update(
        reward_backend=REWARD_BACKEND,
        evaluation_backend=detail.get("evaluation_backend"),
        merged_plan=detail.get("merged_plan"),
        parser_errors=detail.get("parser_errors"),
    )
    return RewardResult(reward=reward, metrics=metrics, details=details)
