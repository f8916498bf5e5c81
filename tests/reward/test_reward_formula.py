"""The shared reward's config and formula pieces: RewardConfig validation, the bottleneck and geometric composite,
plan quality and compute_reward's weights, clamping and the exact 1.0 endpoint."""

from __future__ import annotations

import pytest

from travel.reward import REWARD_RANGE, RewardConfig
from travel.reward.formula import (
    COMPONENT_NAMES,
    PENALTY_NAMES,
    RewardSignals,
    bottleneck,
    compute_reward,
    geometric_composite,
    plan_quality,
)


# ---- RewardConfig --------------------------------------------------------------------------------


def test_config_defaults_are_the_travel_reward_section():
    config = RewardConfig()
    assert (config.protocol_progress_weight, config.recovered_semantic_weight, config.action_validity_weight,
            config.team_action_weight, config.strict_balance_weight, config.strict_quality_weight,
            config.strict_grounding_weight, config.final_success_bonus) == (0.02, 0.03, 0.04, 0.02, 0.14, 0.57, 0.08, 0.10)  # fmt: skip
    assert (config.assignment_coverage_weight, config.required_grounded_weight, config.grounding_f1_weight,
            config.commonsense_weight, config.hard_constraint_weight) == (0.20, 0.25, 0.15, 0.25, 0.15)  # fmt: skip
    assert config.grounding_support_floor == 0.10
    assert (config.invalid_action_penalty, config.conflict_penalty, config.overlap_penalty,
            config.reference_copy_penalty, config.overlong_penalty) == (0.10, 0.05, 0.05, 0.10, 0.05)  # fmt: skip
    assert config.reward_range == REWARD_RANGE == (-0.25, 1.0)


@pytest.mark.parametrize(
    "overrides, named",
    [
        ({"final_success_bonus": 0.2}, "final_success_bonus"),  # positive weights sum to 1.1
        ({"commonsense_weight": 0.3}, "commonsense_weight"),  # Q weights sum to 1.05
        ({"min_reward": 1.0}, "min_reward"),
        ({"overlong_penalty": float("nan")}, "overlong_penalty"),
        ({"max_reward": float("inf")}, "max_reward"),
        ({"conflict_penalty": -0.05}, "conflict_penalty"),
        ({"grounding_support_floor": 1.5}, "grounding_support_floor"),
        ({"overlap_penalty": "0.05"}, "overlap_penalty"),
        ({"overlap_penalty": True}, "overlap_penalty"),
    ],
)
def test_config_rejects_bad_values_naming_the_option(overrides, named):
    with pytest.raises(ValueError, match=named):
        RewardConfig(**overrides)


def test_config_accepts_integers_and_rebalanced_weights():
    config = RewardConfig(final_success_bonus=0, strict_quality_weight=0.67, max_reward=1)
    assert config.final_success_bonus == 0.0 and isinstance(config.max_reward, float)


def test_from_mapping_rejects_unknown_keys_and_keeps_defaults():
    assert RewardConfig.from_mapping({"_target_": "travel.reward.RewardConfig"}) == RewardConfig()
    assert RewardConfig.from_mapping({"min_reward": -0.5}).min_reward == -0.5
    with pytest.raises(ValueError, match="final_sucess_bonus"):
        RewardConfig.from_mapping({"final_sucess_bonus": 0.1})


def test_hydra_reward_config_instantiates_and_round_trips():
    from pathlib import Path

    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    path = Path(__file__).resolve().parents[2] / "conf" / "reward" / "reference_constraint_learnable_budget_dense.yaml"
    node = OmegaConf.load(path)
    assert instantiate(node) == RewardConfig()
    assert RewardConfig.from_mapping(node) == RewardConfig()


# ---- formula pieces ------------------------------------------------------------------------------


def test_bottleneck_and_geometric_composite():
    assert bottleneck([1.0, 0.0]) == pytest.approx(0.10)  # a lazy teammate caps the team at 0.10
    assert bottleneck([0.5, 1.0]) == pytest.approx(0.2 * 0.75 + 0.8 * 0.5)
    assert bottleneck([]) == 0.0
    assert geometric_composite(0.25, 0.5) == pytest.approx(0.25**0.65 * 0.5**0.35)
    assert geometric_composite(0.0, 1.0) == geometric_composite(1.0, 0.0) == 0.0


def test_plan_quality_scales_vacuous_parts_by_grounding_support():
    config = RewardConfig()
    all_dash = {"assignment_coverage": 1.0, "required_grounded_recall": 0.0, "grounding_f1": 0.0,
                "commonsense_soft": 1.0, "hard_constraint_soft": 1.0}  # fmt: skip
    # S = 0.10: 0.10 * (0.20 + 0.25 + 0.15)
    assert plan_quality(all_dash, config) == pytest.approx(0.06)
    half = {"assignment_coverage": 1.0, "required_grounded_recall": 0.5, "grounding_f1": 0.5,
            "commonsense_soft": 0.5, "hard_constraint_soft": 0.0}  # fmt: skip
    support = 0.10 + 0.90 * 0.5
    assert plan_quality(half, config) == pytest.approx(support * 0.20 + 0.25 * 0.5 + 0.15 * 0.5 + support * 0.25 * 0.5)


def _signals(**values: float) -> RewardSignals:
    base = dict.fromkeys(RewardSignals.__dataclass_fields__, 0.0)
    base.update(values)
    return RewardSignals(**base)


def test_formula_weights_each_term_and_penalty():
    config = RewardConfig()
    reward, detail = compute_reward(
        _signals(protocol_progress=0.5, recovered_balance=0.25, recovered_plan_score=0.5, action_validity=0.5,
                 team_action_valid=1.0, required_cooperative_contribution=0.4, strict_plan_score=0.6,
                 required_grounded_recall=0.3, invalid_action_rate=0.1, recovery_violation_rate=0.2,
                 conflict_rate=0.2, overlap_rate=0.4, reference_copy_rate=0.5, overlong_rate=1.0),  # fmt: skip
        config,
    )
    e = 0.25**0.65 * 0.5**0.35
    c = 0.4**0.65 * 0.6**0.35
    expected_components = [0.02 * 0.5, 0.03 * e, 0.04 * 0.5, 0.02, 0.14 * 0.4, 0.57 * c, 0.08 * 0.3, 0.0]
    expected_penalties = [0.10 * 0.2, 0.05 * 0.2, 0.05 * 0.4, 0.10 * 0.5, 0.05 * 1.0]
    for name, value in zip(COMPONENT_NAMES, expected_components):
        assert detail[f"reward_component/{name}"] == pytest.approx(value), name
    for name, value in zip(PENALTY_NAMES, expected_penalties):
        assert detail[f"reward_penalty/{name}"] == pytest.approx(value), name
    assert reward == pytest.approx(sum(expected_components) - sum(expected_penalties))


def test_formula_clamps_to_the_reward_range():
    reward, detail = compute_reward(_signals(invalid_action_rate=1, conflict_rate=1, overlap_rate=1,
                                             reference_copy_rate=1, overlong_rate=1), RewardConfig())  # fmt: skip
    assert detail["unclamped_reward"] == pytest.approx(-0.35)
    assert reward == -0.25


def test_formula_snaps_only_a_perfect_endpoint_to_exactly_one():
    perfect = dict(protocol_progress=1, recovered_balance=1, recovered_plan_score=1, action_validity=1,
                   team_action_valid=1, required_cooperative_contribution=1, strict_plan_score=1,
                   required_grounded_recall=1, collaboration_success=1)  # fmt: skip
    assert compute_reward(_signals(**perfect), RewardConfig())[0] == 1.0
    nearly = dict(perfect, strict_plan_score=1 - 1e-12)
    assert compute_reward(_signals(**nearly), RewardConfig())[0] < 1.0
