"""The shared reward formula `reference_constraint_learnable_budget_dense`.

Owns RewardConfig (the `travel_reward` weights), the plan-quality score Q, the eight positive terms
(P, E, V, J, J*B, J*C, J*G, U), the five penalties, the exact-1.0 snap and the clamp. Everything here
is arithmetic on already-measured signals; parsing, merging and evaluation happen elsewhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Mapping, Sequence

REWARD_BACKEND = "reference_constraint_learnable_budget_dense"

POSITIVE_WEIGHTS: tuple[str, ...] = (
    "protocol_progress_weight",
    "recovered_semantic_weight",
    "action_validity_weight",
    "team_action_weight",
    "strict_balance_weight",
    "strict_quality_weight",
    "strict_grounding_weight",
    "final_success_bonus",
)
QUALITY_WEIGHTS: tuple[str, ...] = (
    "assignment_coverage_weight",
    "required_grounded_weight",
    "grounding_f1_weight",
    "commonsense_weight",
    "hard_constraint_weight",
)
PENALTY_WEIGHTS: tuple[str, ...] = (
    "invalid_action_penalty",
    "conflict_penalty",
    "overlap_penalty",
    "reference_copy_penalty",
    "overlong_penalty",
)
# reward_component/<name> in the order of POSITIVE_WEIGHTS, reward_penalty/<name> in PENALTY_WEIGHTS order.
COMPONENT_NAMES: tuple[str, ...] = (
    "protocol_progress",
    "recovered_semantic",
    "action_validity",
    "team_action",
    "strict_balance",
    "strict_quality",
    "strict_grounding",
    "final_success",
)
PENALTY_NAMES: tuple[str, ...] = ("invalid_action", "conflict", "overlap", "reference_copy", "overlong")

_SUM_TOLERANCE = 1e-9
_SNAP_ULPS = 8


@dataclass(frozen=True)
class RewardConfig:
    """Every weight of the reward; validated on construction (see `_validate`)."""

    protocol_progress_weight: float = 0.02
    recovered_semantic_weight: float = 0.03
    action_validity_weight: float = 0.04
    team_action_weight: float = 0.02
    strict_balance_weight: float = 0.14
    strict_quality_weight: float = 0.57
    strict_grounding_weight: float = 0.08
    final_success_bonus: float = 0.10
    assignment_coverage_weight: float = 0.20
    required_grounded_weight: float = 0.25
    grounding_f1_weight: float = 0.15
    commonsense_weight: float = 0.25
    hard_constraint_weight: float = 0.15
    grounding_support_floor: float = 0.10
    invalid_action_penalty: float = 0.10
    conflict_penalty: float = 0.05
    overlap_penalty: float = 0.05
    reference_copy_penalty: float = 0.10
    overlong_penalty: float = 0.05
    min_reward: float = -0.25
    max_reward: float = 1.0

    def __post_init__(self) -> None:
        for option in fields(self):
            value = getattr(self, option.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"reward option {option.name!r} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"reward option {option.name!r} must be finite, got {value!r}")
            object.__setattr__(self, option.name, float(value))
        for name in (*POSITIVE_WEIGHTS, *QUALITY_WEIGHTS, *PENALTY_WEIGHTS):
            if getattr(self, name) < 0:
                raise ValueError(f"reward option {name!r} must be >= 0, got {getattr(self, name)!r}")
        if not 0.0 <= self.grounding_support_floor <= 1.0:
            raise ValueError(f"reward option 'grounding_support_floor' must lie in [0, 1], got {self.grounding_support_floor!r}")
        for group, label in ((POSITIVE_WEIGHTS, "positive reward weights"), (QUALITY_WEIGHTS, "plan-quality (Q) weights")):
            total = math.fsum(getattr(self, name) for name in group)
            if abs(total - 1.0) > _SUM_TOLERANCE:
                raise ValueError(f"{label} {' + '.join(group)} must sum to 1, got {total!r}")
        if not self.min_reward < self.max_reward:
            raise ValueError(
                f"reward option 'min_reward' ({self.min_reward!r}) must be below 'max_reward' ({self.max_reward!r})"
            )

    @property
    def reward_range(self) -> tuple[float, float]:
        return (self.min_reward, self.max_reward)

    @classmethod
    def from_mapping(cls, cfg: Any) -> "RewardConfig":
        """Build from a dict or an OmegaConf node (e.g. the Hydra `reward` group). Missing keys keep their
        defaults; `_target_` is ignored; any other unknown key is an error naming it."""
        if cfg is None:
            return cls()
        if not isinstance(cfg, Mapping):
            try:
                from omegaconf import DictConfig, OmegaConf
            except ImportError:  # pragma: no cover - omegaconf is a dependency
                DictConfig = None
            if DictConfig is None or not isinstance(cfg, DictConfig):
                raise TypeError(f"reward config must be a mapping, got {type(cfg).__name__}")
            cfg = OmegaConf.to_container(cfg, resolve=True)
        known = {option.name for option in fields(cls)}
        unknown = sorted(str(key) for key in cfg if key not in known and key != "_target_")
        if unknown:
            raise ValueError(f"unknown reward option {unknown[0]!r}" + (f" (also: {', '.join(unknown[1:])})" if unknown[1:] else ""))
        return cls(**{key: value for key, value in cfg.items() if key in known})


def bottleneck(values: Sequence[float]) -> float:
    """0.2 * mean + 0.8 * min; 0 for no values. A weak role caps the team."""
    if not values:
        return 0.0
    return 0.2 * (math.fsum(values) / len(values)) + 0.8 * min(values)


def geometric_composite(balance: float, quality: float) -> float:
    """balance^0.65 * quality^0.35, or 0 when either is <= 0."""
    if balance <= 0.0 or quality <= 0.0:
        return 0.0
    return balance**0.65 * quality**0.35


def unit(value: Any) -> float:
    """A signal as a float in [0, 1]; non-numbers and NaN become 0 so a reward is always finite."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    if number != number:
        return 0.0
    return min(1.0, max(0.0, number))


def plan_quality(metrics: Mapping[str, Any], config: RewardConfig) -> float:
    """Q: coverage, recall, F1, commonsense and hard-constraint softs, with the coverage and constraint
    parts scaled by S = floor + (1 - floor) * recall so an all-dash plan cannot collect vacuous passes."""
    recall = unit(metrics.get("required_grounded_recall"))
    support = config.grounding_support_floor + (1.0 - config.grounding_support_floor) * recall
    return math.fsum(
        (
            support * config.assignment_coverage_weight * unit(metrics.get("assignment_coverage")),
            config.required_grounded_weight * recall,
            config.grounding_f1_weight * unit(metrics.get("grounding_f1")),
            support * config.commonsense_weight * unit(metrics.get("commonsense_soft")),
            support * config.hard_constraint_weight * unit(metrics.get("hard_constraint_soft")),
        )
    )


@dataclass(frozen=True)
class RewardSignals:
    """The measured inputs of the formula; every field is a rate or score in [0, 1]."""

    protocol_progress: float  # P
    recovered_balance: float  # B-hat: recovered per-role contribution bottleneck
    recovered_plan_score: float  # Q of the recovered plan
    action_validity: float  # V
    team_action_valid: float  # J
    required_cooperative_contribution: float  # B
    strict_plan_score: float  # Q of the strict plan
    required_grounded_recall: float  # G
    collaboration_success: float  # U
    invalid_action_rate: float
    recovery_violation_rate: float
    conflict_rate: float
    overlap_rate: float
    reference_copy_rate: float
    overlong_rate: float


_SIGNAL_NAMES: tuple[str, ...] = tuple(f.name for f in fields(RewardSignals))


def compute_reward(signals: RewardSignals, config: RewardConfig) -> tuple[float, dict[str, float]]:
    """The shared reward and its accounting (the detail keys of docs/reward.md "Reward formula")."""
    s = {name: unit(getattr(signals, name)) for name in _SIGNAL_NAMES}
    gate = s["team_action_valid"]
    strict_quality = geometric_composite(s["required_cooperative_contribution"], s["strict_plan_score"])
    recovered_quality = geometric_composite(s["recovered_balance"], s["recovered_plan_score"])
    terms = (
        s["protocol_progress"],
        recovered_quality,
        s["action_validity"],
        gate,
        gate * s["required_cooperative_contribution"],
        gate * strict_quality,
        gate * s["required_grounded_recall"],
        s["collaboration_success"],
    )
    rates = (
        max(s["invalid_action_rate"], s["recovery_violation_rate"]),
        s["conflict_rate"],
        s["overlap_rate"],
        s["reference_copy_rate"],
        s["overlong_rate"],
    )
    components = [getattr(config, w) * t for w, t in zip(POSITIVE_WEIGHTS, terms)]
    penalties = [getattr(config, w) * r for w, r in zip(PENALTY_WEIGHTS, rates)]
    unclamped = math.fsum(components) - math.fsum(penalties)
    endpoints = (
        s["collaboration_success"],
        s["action_validity"],
        gate,
        s["required_cooperative_contribution"],
        s["required_grounded_recall"],
        s["protocol_progress"],
        s["recovered_balance"],
        s["strict_plan_score"],
        s["recovered_plan_score"],
    )
    reward = unclamped
    if all(v == 1.0 for v in endpoints) and not any(penalties) and abs(reward - 1.0) <= _SNAP_ULPS * math.ulp(1.0):
        reward = 1.0
    reward = min(config.max_reward, max(config.min_reward, reward))

    details: dict[str, float] = {
        "reward": reward,
        "unclamped_reward": unclamped,
        "plan_score": s["strict_plan_score"],
        "strict_composite_quality": strict_quality,
        "joint_validity_gate": gate,
        "joint_quality_gate": gate * strict_quality,
        "protocol_progress": s["protocol_progress"],
        "recovered_semantic_balance": s["recovered_balance"],
        "recovered_plan_score": s["recovered_plan_score"],
        "recovered_composite_quality": recovered_quality,
    }
    details.update({f"reward_component/{name}": value for name, value in zip(COMPONENT_NAMES, components)})
    details.update({f"reward_penalty/{name}": value for name, value in zip(PENALTY_NAMES, penalties)})
    return reward, details


def reward_signals(detail: Mapping[str, Any], surface: Any, config: RewardConfig) -> RewardSignals:
    """Formula inputs from the joint evaluation detail (strict side) and the recovery surface.

    P = bottleneck over agents of 0.5 * format progress + 0.5 * soft action validity;
    B-hat = bottleneck over agents of recovered contribution * structural * (1 - violation)^2."""
    progress = [
        0.5 * unit(agent.format_progress) + 0.5 * unit(detail.get(f"agent_{agent.agent_id}/soft_action_validity"))
        for agent in surface.agents
    ]
    return RewardSignals(
        protocol_progress=bottleneck(progress),
        recovered_balance=bottleneck([unit(term) for term in surface.balance_terms]),
        recovered_plan_score=plan_quality(surface.recovered_plan, config),
        action_validity=unit(detail.get("action_validity")),
        team_action_valid=unit(detail.get("team_action_valid")),
        required_cooperative_contribution=unit(detail.get("required_cooperative_contribution")),
        strict_plan_score=plan_quality(detail, config),
        required_grounded_recall=unit(detail.get("required_grounded_recall")),
        collaboration_success=unit(detail.get("ultimate/collaboration_success")),
        invalid_action_rate=unit(detail.get("invalid_action_rate")),
        recovery_violation_rate=unit(surface.recovery_violation_rate),
        conflict_rate=unit(detail.get("conflict_rate")),
        overlap_rate=unit(detail.get("overlap_rate")),
        reference_copy_rate=unit(surface.reference_copy_rate),
        overlong_rate=unit(surface.overlong_rate),
    )
