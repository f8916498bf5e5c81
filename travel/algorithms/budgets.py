"""Per-algorithm budgets: collected preference candidates, env steps, optimizer updates and evaluations.

The dry run reports these numbers and the trainers check their own counts against them, so both read one
computation. Units (SEED.md "MAPL preference algorithms"):
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
from typing import Any, Mapping, Optional

from travel.algorithms.schedule import TrainingSchedule, curriculum_schedule
from travel.data.curriculum import CurriculumError, CurriculumSplit

ALGORITHM_FAMILIES: dict[str, str] = {
    "magrpo": "magrpo",
    "madpo": "madpo",
    "madpo_iter": "madpo",
    "marlhf": "marlhf",
    "marlhf_iter": "marlhf",
}
PAIR_SELECTIONS = ("reward_gap", "comparator_reward")


class BudgetError(ValueError):
    """An algorithm option that cannot give a budget; the message names the option."""


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


def _int_option(cfg: Mapping[str, Any], key: str, minimum: int) -> int:
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise BudgetError(f"algorithm.{key}={value!r}: expected an integer >= {minimum}")
    return value


def is_iterative(cfg: Mapping[str, Any]) -> bool:
    return cfg.get("num_iterations") is not None


def comparator_candidates(cfg: Mapping[str, Any]) -> int:
    """Comparator candidates per row and iteration: 0 without an iterative comparator refresh."""
    if not is_iterative(cfg):
        return 0
    value = cfg.get("comparator_num_candidates")
    if value is None:
        return _int_option(cfg, "preference_num_candidates", 1)
    return _int_option(cfg, "comparator_num_candidates", 1)


def pairs_per_row_bound(cfg: Mapping[str, Any]) -> int:
    """Most pairs one row can yield in one collection, given the selection rule and the candidate counts."""
    keep = _int_option(cfg, "preference_pairs_per_sample", 1)
    targets = _int_option(cfg, "preference_num_candidates", 1)
    selection = cfg.get("pair_selection")
    if selection == "reward_gap":
        pool = targets + comparator_candidates(cfg)
        return min(keep, pool * (pool - 1) // 2)
    if selection == "comparator_reward":
        if not is_iterative(cfg):
            raise BudgetError(
                f"algorithm.pair_selection=comparator_reward needs an iterative algorithm with comparator "
                f"candidates; algorithm={cfg.get('name')} has none (use reward_gap)"
            )
        return min(keep, targets, comparator_candidates(cfg))
    raise BudgetError(f"algorithm.pair_selection={selection!r}: choose one of {', '.join(PAIR_SELECTIONS)}")


def training_sample_bound(cfg: Mapping[str, Any], new_pairs_bound: int) -> int:
    """Most pairs trained on per iteration: the replay sample size, which defaults to the new pairs."""
    size = cfg.get("preference_replay_sample_size")
    if is_iterative(cfg) and size is not None:
        return _int_option(cfg, "preference_replay_sample_size", 1)
    return new_pairs_bound


def online_schedule(cfg: Mapping[str, Any], split: CurriculumSplit, epochs: int) -> TrainingSchedule:
    """The MAGRPO phase of MARLHF: all train rows from the outset, no short phase."""
    try:
        return curriculum_schedule(
            split,
            num_train_epochs=epochs,
            num_generations=_int_option(cfg, "num_generations", 2),
            rollout_buffer_size=_int_option(cfg, "rollout_buffer_size", 1),
            short_epochs=0,
            use_short_phase=False,
            eval_every_epochs=_int_option(cfg, "eval_every_epochs", 1),
        )
    except CurriculumError as exc:
        raise BudgetError(str(exc)) from exc


def magrpo_budget(cfg: Mapping[str, Any], split: CurriculumSplit, schedule: TrainingSchedule) -> Budget:
    return Budget(
        algorithm=str(cfg.get("name")),
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


def preference_budget(cfg: Mapping[str, Any], split: CurriculumSplit) -> Budget:
    """MADPO, MADPO-iter, MARLHF or MARLHF-iter, from the algorithm config and the train split."""
    name = str(cfg.get("name"))
    family = ALGORITHM_FAMILIES.get(name)
    if family not in ("madpo", "marlhf"):
        raise BudgetError(f"algorithm={name}: not a preference algorithm ({', '.join(ALGORITHM_FAMILIES)})")
    if cfg.get("use_short_phase"):
        raise BudgetError(f"algorithm.use_short_phase=true: {name} trains on all train rows from the outset")
    rows = len(split.train)
    if rows == 0:
        raise BudgetError("curriculum.train_per_cell=0: the train split is empty")
    iterations = _int_option(cfg, "num_iterations", 1) if is_iterative(cfg) else 1
    epochs = _int_option(cfg, "num_train_epochs", 1)
    per_row = _int_option(cfg, "preference_num_candidates", 1) + comparator_candidates(cfg)
    _int_option(cfg, "preference_generation_batch_size", 1)
    new_pairs = rows * pairs_per_row_bound(cfg)
    sample = training_sample_bound(cfg, new_pairs)
    details: dict[str, Any] = {
        "iterations": iterations,
        "epochs_per_iteration": epochs,
        "candidates_per_row_and_iteration": per_row,
        "new_pairs_per_iteration_upper_bound": new_pairs,
        "trained_pairs_per_iteration_upper_bound": sample,
    }
    common = dict(
        algorithm=name,
        train_rows=rows,
        collected_candidates=iterations * rows * per_row,
        preference_pairs_upper_bound=iterations * new_pairs,
    )
    if family == "madpo":
        per_pair = _int_option(cfg, "environment_steps_per_pair", 1)
        batch = _int_option(cfg, "train_batch_size", 1)
        env_steps = iterations * epochs * sample * per_pair
        details["eval_every_updates"] = _int_option(cfg, "eval_every_updates", 1)
        return Budget(
            **common,
            env_steps=env_steps,
            env_steps_unit="pair_counted",
            env_steps_is_upper_bound=True,
            env_steps_by_phase={"dpo": env_steps},
            optimizer_updates_per_agent=iterations * epochs * math.ceil(sample / batch),
            optimizer_updates_is_upper_bound=True,
            eval_env_steps=None,
            details=details,
        )
    schedule = online_schedule(cfg, split, iterations * epochs)
    reward_epochs = _int_option(cfg, "reward_num_train_epochs", 1)
    reward_batch = _int_option(cfg, "reward_train_batch_size", 1)
    return Budget(
        **common,
        env_steps=schedule.env_steps,
        env_steps_unit="online_joint_actions",
        env_steps_is_upper_bound=False,
        env_steps_by_phase={"online": schedule.env_steps},
        optimizer_updates_per_agent=schedule.optimizer_updates_per_agent,
        optimizer_updates_is_upper_bound=False,
        eval_env_steps=schedule.eval_env_steps(),
        reward_model_updates_upper_bound=iterations * reward_epochs * math.ceil(sample / reward_batch),
        details=details,
    )


def algorithm_budget(
    cfg: Mapping[str, Any], split: CurriculumSplit, magrpo_schedule: Optional[TrainingSchedule] = None
) -> Budget:
    """The budget of any algorithm; MAGRPO's comes from its curriculum schedule (travel.run.Run.schedule)."""
    name = str(cfg.get("name"))
    if ALGORITHM_FAMILIES.get(name) == "magrpo":
        if magrpo_schedule is None:
            raise BudgetError("algorithm=magrpo: its budget comes from the curriculum schedule; pass it")
        return magrpo_budget(cfg, split, magrpo_schedule)
    return preference_budget(cfg, split)
