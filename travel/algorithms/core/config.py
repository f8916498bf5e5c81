"""Typed algorithm configs: `conf/algorithm/<name>.yaml` maps onto one frozen dataclass per algorithm.

An algorithm's config class combines the option groups below (each validates its own fields in
`validate`, cooperatively through the class hierarchy) and is declared once in the registry
(travel/algorithms/core/registry.py) with its budget and trainer. `from_mapping` builds it from a dict or an
OmegaConf node: missing keys keep the dataclass defaults (which equal the YAML's, tests/algorithms/
test_config.py), `_target_` is ignored, and any other unknown key is an error that names it. The dry run and
the trainer read the same object.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Mapping, Optional

from travel.algorithms.preference.replay import REPLAY_MODES

PAIR_SELECTIONS = ("reward_gap", "comparator_reward")
ADVANTAGE_MODES = ("mean", "raw", "max", "rloo")


class AlgorithmConfigError(ValueError):
    """An algorithm option that cannot work; the message names the option."""


def require_int(config: Any, key: str, minimum: int) -> int:
    value = getattr(config, key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise AlgorithmConfigError(f"algorithm.{key}={value!r}: expected an integer >= {minimum}")
    return value


def require_optional_int(config: Any, key: str, minimum: int) -> None:
    if getattr(config, key) is not None:
        require_int(config, key, minimum)


def require_positive_float(config: Any, key: str) -> float:
    value = getattr(config, key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not value > 0:
        raise AlgorithmConfigError(f"algorithm.{key}={value!r}: must be a number > 0")
    object.__setattr__(config, key, float(value))
    return float(value)


def require_bool(config: Any, key: str) -> None:
    if not isinstance(getattr(config, key), bool):
        raise AlgorithmConfigError(f"algorithm.{key}={getattr(config, key)!r}: expected true or false")


def require_choice(config: Any, key: str, choices: tuple[str, ...]) -> None:
    if getattr(config, key) not in choices:
        raise AlgorithmConfigError(f"algorithm.{key}={getattr(config, key)!r}: choose one of {', '.join(choices)}")


@dataclass(frozen=True)
class AlgorithmConfig:
    """What every algorithm has. `iterative` algorithms refresh against a comparator each iteration;
    `preference` algorithms collect labelled pairs (and run mode=train's preference checks)."""

    name: str = ""
    num_train_epochs: int = 1
    learning_rate: float = 2.0e-5
    rollout_buffer_size: int = 10
    use_short_phase: bool = False

    iterative: ClassVar[bool] = False
    # The options `experiment=smoke` sets, per option group; `smoke_options` merges those of the class's groups.
    SMOKE: ClassVar[Mapping[str, Any]] = {}

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise AlgorithmConfigError(f"algorithm.name={self.name!r}: expected the algorithm's registered name")
        require_int(self, "num_train_epochs", 1)
        require_positive_float(self, "learning_rate")
        require_int(self, "rollout_buffer_size", 1)
        require_bool(self, "use_short_phase")

    def device_options(self) -> dict[str, Any]:
        """Devices this algorithm places models on beyond the actors, by option name (checked in mode=dry)."""
        return {}

    @classmethod
    def smoke_options(cls) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for group in reversed(cls.__mro__):
            merged.update(vars(group).get("SMOKE", {}))
        return merged

    @classmethod
    def from_mapping(cls, cfg: Any) -> "AlgorithmConfig":
        """From a dict or an OmegaConf node; unknown keys are named, `_target_` is ignored."""
        from omegaconf import DictConfig, OmegaConf

        if isinstance(cfg, cls):
            return cfg
        if isinstance(cfg, DictConfig):
            cfg = OmegaConf.to_container(cfg, resolve=True)
        if not isinstance(cfg, Mapping):
            raise TypeError(f"{cls.__name__} is built from a mapping of algorithm options, got {type(cfg).__name__}")
        known = {option.name for option in fields(cls)}
        unknown = sorted(str(key) for key in cfg if key not in known and key != "_target_")
        if unknown:
            name = cfg.get("name", cls.__name__)
            raise AlgorithmConfigError(
                f"unknown option algorithm.{unknown[0]} for algorithm={name}"
                + (f" (also: {', '.join(unknown[1:])})" if unknown[1:] else "")
            )
        values = {key: tuple(value) if isinstance(value, list) else value for key, value in cfg.items() if key in known}
        return cls(**values)


@dataclass(frozen=True)
class OnlineOptions:
    """MAGRPO's online phase: K aligned joint actions per prompt, group advantages, buffers of prompts."""

    num_generations: int = 4
    eval_every_epochs: int = 1
    advantage_mode: str = "mean"
    advantage_normalization: bool = False
    logging_steps: int = 20  # env steps between two turn_1/* records

    SMOKE: ClassVar[Mapping[str, Any]] = {"num_generations": 2, "logging_steps": 4}

    def validate(self) -> None:
        super().validate()  # type: ignore[misc]
        require_int(self, "num_generations", 1)
        require_int(self, "eval_every_epochs", 1)
        require_choice(self, "advantage_mode", ADVANTAGE_MODES)
        require_bool(self, "advantage_normalization")
        require_int(self, "logging_steps", 1)


@dataclass(frozen=True)
class CollectionOptions:
    """Preference collection: candidates per row, generation batch, pairs kept per row and how they are chosen."""

    preference_num_candidates: int = 20
    preference_generation_batch_size: int = 20
    preference_pairs_per_sample: int = 6
    pair_selection: str = "reward_gap"
    train_batch_size: int = 10

    # 3 candidates per row, the widest pair of each row, batches of 2 pairs
    SMOKE: ClassVar[Mapping[str, Any]] = {
        "preference_num_candidates": 3,
        "preference_generation_batch_size": 3,
        "preference_pairs_per_sample": 1,
        "train_batch_size": 2,
    }

    def validate(self) -> None:
        super().validate()  # type: ignore[misc]
        if self.use_short_phase:  # type: ignore[attr-defined]
            raise AlgorithmConfigError(f"algorithm.use_short_phase=true: {self.name} trains on all train rows from the outset")  # type: ignore[attr-defined]
        require_int(self, "preference_num_candidates", 1)
        require_int(self, "preference_generation_batch_size", 1)
        require_int(self, "preference_pairs_per_sample", 1)
        require_choice(self, "pair_selection", PAIR_SELECTIONS)
        if self.pair_selection == "reward_gap" and self.preference_num_candidates + self.comparator_candidates < 2:
            raise AlgorithmConfigError(
                f"algorithm.preference_num_candidates={self.preference_num_candidates}: reward_gap pairs two "
                f"candidates of a row, so a row needs at least 2"
            )
        if self.pair_selection == "comparator_reward" and not self.iterative:  # type: ignore[attr-defined]
            raise AlgorithmConfigError(
                f"algorithm.pair_selection=comparator_reward needs an iterative algorithm with comparator "
                f"candidates; algorithm={self.name} has none (use reward_gap)"  # type: ignore[attr-defined]
            )
        require_int(self, "train_batch_size", 1)

    @property
    def comparator_candidates(self) -> int:
        """Comparator candidates per row and iteration: 0 without an iterative comparator refresh."""
        return 0


@dataclass(frozen=True)
class IterativeOptions:
    """Refreshes against a comparator, each stored as a replay shard and sampled with lambda decay."""

    num_iterations: int = 6
    comparator_num_candidates: Optional[int] = None  # None: as many as preference_num_candidates
    comparator_devices: tuple[str, ...] = ("cpu", "cpu")
    # a current_copy comparator on the actors' devices samples in the target's decoder calls, each from its own
    # random stream: one prompt fill per call, calls of up to twice preference_generation_batch_size candidates
    shared_comparator_calls: bool = True
    preference_replay_mode: str = "lambda_decay"
    preference_replay_lambda: Optional[float] = 0.8
    preference_replay_sample_size: Optional[int] = None  # None: the number of new pairs
    log_reward_distribution: bool = True

    iterative: ClassVar[bool] = True
    SMOKE: ClassVar[Mapping[str, Any]] = {"num_iterations": 1}

    def validate(self) -> None:
        super().validate()  # type: ignore[misc]

        require_int(self, "num_iterations", 1)
        require_optional_int(self, "comparator_num_candidates", 1)
        require_choice(self, "preference_replay_mode", REPLAY_MODES)
        require_optional_int(self, "preference_replay_sample_size", 1)
        require_bool(self, "log_reward_distribution")
        require_bool(self, "shared_comparator_calls")
        lam = self.preference_replay_lambda
        if lam is not None and (isinstance(lam, bool) or not isinstance(lam, (int, float)) or not 0.0 <= lam <= 1.0):
            raise AlgorithmConfigError(f"algorithm.preference_replay_lambda={lam!r}: must be a number in [0, 1] (or null)")
        if lam is None and self.preference_replay_mode == "lambda_decay":
            raise AlgorithmConfigError("algorithm.preference_replay_lambda=null: preference_replay_mode=lambda_decay needs it")

    @property
    def comparator_candidates(self) -> int:
        return self.comparator_num_candidates or self.preference_num_candidates  # type: ignore[attr-defined]

    def device_options(self) -> dict[str, Any]:
        return {**super().device_options(), "algorithm.comparator_devices": self.comparator_devices}  # type: ignore[misc]


@dataclass(frozen=True)
class DPOOptions:
    """Joint DPO over the selected pairs, with a pair-counted env step."""

    eval_every_updates: int = 12
    dpo_beta: float = 0.1
    environment_steps_per_pair: int = 2

    SMOKE: ClassVar[Mapping[str, Any]] = {"eval_every_updates": 2}

    def validate(self) -> None:
        super().validate()  # type: ignore[misc]
        require_int(self, "eval_every_updates", 1)
        require_positive_float(self, "dpo_beta")
        require_int(self, "environment_steps_per_pair", 1)


@dataclass(frozen=True)
class RewardModelOptions:
    """The Bradley-Terry reward model that MARLHF fits on the pairs and scores online rollouts with."""

    reward_model_name: Optional[str] = None  # None: the actors' base model
    reward_model_device: str = "cpu"
    reward_learning_rate: float = 1.0e-5
    reward_num_train_epochs: int = 1
    reward_train_batch_size: int = 1
    reward_max_length: int = 32768
    reward_freeze_backbone: bool = False

    def validate(self) -> None:
        super().validate()  # type: ignore[misc]
        if not isinstance(self.reward_model_device, str) or not self.reward_model_device:
            raise AlgorithmConfigError(f"algorithm.reward_model_device={self.reward_model_device!r}: expected a device string")
        require_positive_float(self, "reward_learning_rate")
        require_int(self, "reward_num_train_epochs", 1)
        require_int(self, "reward_train_batch_size", 1)
        require_int(self, "reward_max_length", 1)
        require_bool(self, "reward_freeze_backbone")

    def device_options(self) -> dict[str, Any]:
        return {**super().device_options(), "algorithm.reward_model_device": self.reward_model_device}  # type: ignore[misc]
