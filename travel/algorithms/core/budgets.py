"""Per-algorithm budgets: collected preference candidates, env steps, optimizer updates and evaluations.

The dry run reports these numbers and the trainers check their own counts against them, so both read one
computation. Units (docs/algorithms.md "Units"):
- `collected_candidates`: aligned joint candidates sampled to label preferences (target plus comparator).
  Preference collection never advances env_step.
- `env_steps`: MAGRPO and MARLHF count online joint actions (exact); MADPO counts
  `environment_steps_per_pair` per trained pair, replayed pairs included. Ties yield no pair, so the MADPO
  figures are upper bounds and say so.
- `optimizer_updates_per_agent`: one per rollout buffer (MAGRPO phases) or per DPO batch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from travel.algorithms.core.config import AlgorithmConfigError
from travel.algorithms.core.schedule import TrainingSchedule, curriculum_schedule
from travel.data.curriculum import CurriculumError, CurriculumSplit

if TYPE_CHECKING:
    from travel.algorithms.core.config import AlgorithmConfig, CollectionOptions, OnlineOptions


@dataclass(frozen=True)
class Budget:
    algorithm: str
    train_rows: int
    collected_candidates: int
    env_steps: int
    env_steps_unit: str  # "online_joint_actions" | "pair_counted"
    env_steps_is_upper_bound: bool
    env_steps_by_phase: dict[str, int]
    optimizer_updates_per_agent: int
    optimizer_updates_is_upper_bound: bool
    # Env steps of the periodic and terminal evaluations; None where they depend on the pairs selected.
    eval_env_steps: Optional[list[int]]
    preference_pairs_upper_bound: int = 0
    reward_model_updates_upper_bound: Optional[int] = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_report(self) -> dict[str, Any]:
        return asdict(self)


def pairs_per_row_bound(config: "CollectionOptions") -> int:
    """Most pairs one row can yield in one collection, given the selection rule and the candidate counts."""
    keep, targets = config.preference_pairs_per_sample, config.preference_num_candidates
    if config.pair_selection == "reward_gap":
        pool = targets + config.comparator_candidates
        return min(keep, pool * (pool - 1) // 2)
    return min(keep, targets, config.comparator_candidates)  # comparator_reward: index-wise target/comparator


def training_sample_bound(config: "CollectionOptions", new_pairs_bound: int) -> int:
    """Most pairs trained on per iteration: the replay sample size, which defaults to the new pairs."""
    size = getattr(config, "preference_replay_sample_size", None)
    return new_pairs_bound if size is None else size


def magrpo_schedule(config: "OnlineOptions", split: CurriculumSplit, short_epochs: int) -> TrainingSchedule:
    """MAGRPO's curriculum schedule: the short phase (when algorithm.use_short_phase), then all train rows."""
    return curriculum_schedule(
        split,
        num_train_epochs=config.num_train_epochs,  # type: ignore[attr-defined]
        num_generations=config.num_generations,
        rollout_buffer_size=config.rollout_buffer_size,  # type: ignore[attr-defined]
        short_epochs=short_epochs,
        use_short_phase=config.use_short_phase,  # type: ignore[attr-defined]
        eval_every_epochs=config.eval_every_epochs,
    )


def online_schedule(config: "OnlineOptions", split: Any, epochs: int) -> TrainingSchedule:
    """The MAGRPO phase of MARLHF: all train rows from the outset, no short phase."""
    if config.num_generations < 2:
        raise AlgorithmConfigError(f"algorithm.num_generations={config.num_generations!r}: expected an integer >= 2")
    try:
        return curriculum_schedule(
            split,
            num_train_epochs=epochs,
            num_generations=config.num_generations,
            rollout_buffer_size=config.rollout_buffer_size,  # type: ignore[attr-defined]
            short_epochs=0,
            use_short_phase=False,
            eval_every_epochs=config.eval_every_epochs,
        )
    except CurriculumError as exc:
        raise AlgorithmConfigError(str(exc)) from exc


def magrpo_budget(config: "AlgorithmConfig", split: CurriculumSplit, short_epochs: int) -> Budget:
    schedule = magrpo_schedule(config, split, short_epochs)  # type: ignore[arg-type]
    return Budget(
        algorithm=config.name,
        train_rows=len(split.train),
        collected_candidates=0,
        env_steps=schedule.env_steps,
        env_steps_unit="online_joint_actions",
        env_steps_is_upper_bound=False,
        env_steps_by_phase=schedule.env_steps_by_phase(),
        optimizer_updates_per_agent=schedule.optimizer_updates_per_agent,
        optimizer_updates_is_upper_bound=False,
        eval_env_steps=schedule.eval_env_steps(),
    )


def _collection(config: Any, split: Any) -> tuple[int, int, dict[str, Any], dict[str, Any]]:
    """What every preference budget shares: iterations, trained pairs per iteration, details, common fields."""
    rows = len(split.train)
    if rows == 0:
        raise AlgorithmConfigError("curriculum.train_per_cell=0: the train split is empty")
    iterations = config.num_iterations if config.iterative else 1
    per_row = config.preference_num_candidates + config.comparator_candidates
    new_pairs = rows * pairs_per_row_bound(config)
    sample = training_sample_bound(config, new_pairs)
    details: dict[str, Any] = {
        "iterations": iterations,
        "epochs_per_iteration": config.num_train_epochs,
        "candidates_per_row_and_iteration": per_row,
        "new_pairs_per_iteration_upper_bound": new_pairs,
        "trained_pairs_per_iteration_upper_bound": sample,
    }
    common = dict(
        algorithm=config.name,
        train_rows=rows,
        collected_candidates=iterations * rows * per_row,
        preference_pairs_upper_bound=iterations * new_pairs,
    )
    return iterations, sample, details, common


def madpo_budget(config: Any, split: Any, short_epochs: int = 0) -> Budget:
    """MADPO and MADPO-iter: env steps count environment_steps_per_pair per trained pair (upper bounds)."""
    iterations, sample, details, common = _collection(config, split)
    epochs = config.num_train_epochs
    env_steps = iterations * epochs * sample * config.environment_steps_per_pair
    details["eval_every_updates"] = config.eval_every_updates
    return Budget(
        **common,
        env_steps=env_steps,
        env_steps_unit="pair_counted",
        env_steps_is_upper_bound=True,
        env_steps_by_phase={"dpo": env_steps},
        optimizer_updates_per_agent=iterations * epochs * math.ceil(sample / config.train_batch_size),
        optimizer_updates_is_upper_bound=True,
        eval_env_steps=None,
        details=details,
    )


def marlhf_budget(config: Any, split: Any, short_epochs: int = 0) -> Budget:
    """MARLHF and MARLHF-iter: the online phase's joint actions (exact), reward-model updates as a bound."""
    iterations, sample, details, common = _collection(config, split)
    schedule = online_schedule(config, split, iterations * config.num_train_epochs)
    return Budget(
        **common,
        env_steps=schedule.env_steps,
        env_steps_unit="online_joint_actions",
        env_steps_is_upper_bound=False,
        env_steps_by_phase={"online": schedule.env_steps},
        optimizer_updates_per_agent=schedule.optimizer_updates_per_agent,
        optimizer_updates_is_upper_bound=False,
        eval_env_steps=schedule.eval_env_steps(),
        reward_model_updates_upper_bound=iterations * config.reward_num_train_epochs
        * math.ceil(sample / config.reward_train_batch_size),
        details=details,
    )
