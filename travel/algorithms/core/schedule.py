"""Training schedules: phases of (rows, epochs) and the env-step, update and evaluation budgets they imply.

One env step is one aligned joint action (both agents acting once), so a prompt with K generations costs
K env steps whatever the number of agents. The dry run and the trainers both read these numbers, so the
dry run's prediction and the trainer's count cannot drift apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from travel.data.curriculum import CurriculumError, CurriculumSplit
from travel.data.row import TravelRow


@dataclass(frozen=True)
class Phase:
    name: str
    rows: tuple[TravelRow, ...]
    epochs: int


@dataclass(frozen=True)
class TrainingSchedule:
    phases: tuple[Phase, ...]
    num_generations: int
    rollout_buffer_size: int
    eval_every_epochs: int = 1

    def env_steps_by_phase(self) -> dict[str, int]:
        return {p.name: p.epochs * len(p.rows) * self.num_generations for p in self.phases}

    @property
    def env_steps(self) -> int:
        return sum(self.env_steps_by_phase().values())

    @property
    def optimizer_updates_per_agent(self) -> int:
        """One update per full or partial buffer of prompts; a partial buffer at an epoch end is processed."""
        return sum(p.epochs * math.ceil(len(p.rows) / self.rollout_buffer_size) for p in self.phases)

    def epochs(self) -> list[tuple[str, tuple[TravelRow, ...]]]:
        """Every epoch in order as (phase name, rows in training order)."""
        return [(p.name, p.rows) for p in self.phases for _ in range(p.epochs)]

    def eval_env_steps(self) -> list[int]:
        """Env steps of the periodic anchor evaluations (epoch starts), then the terminal evaluation."""
        steps, env_step = [], 0
        for epoch, (_, rows) in enumerate(self.epochs()):
            if epoch % self.eval_every_epochs == 0:
                steps.append(env_step)
            env_step += len(rows) * self.num_generations
        return steps + [env_step]


def curriculum_schedule(
    split: CurriculumSplit,
    *,
    num_train_epochs: int,
    num_generations: int,
    rollout_buffer_size: int,
    short_epochs: int,
    use_short_phase: bool = True,
    eval_every_epochs: int = 1,
) -> TrainingSchedule:
    """MAGRPO's two phases: `short_epochs` over the short rows, then the rest over the whole train split."""
    if num_generations < 2:
        raise CurriculumError(f"algorithm.num_generations={num_generations}: group advantages need at least 2")
    if rollout_buffer_size < 1:
        raise CurriculumError(f"algorithm.rollout_buffer_size={rollout_buffer_size}: must be >= 1")
    if num_train_epochs < 1:
        raise CurriculumError(f"algorithm.num_train_epochs={num_train_epochs}: must be >= 1")
    if eval_every_epochs < 1:
        raise CurriculumError(f"algorithm.eval_every_epochs={eval_every_epochs}: must be >= 1")
    if not split.train:
        raise CurriculumError("curriculum.train_per_cell=0: the train split is empty")
    phases: Sequence[Phase]
    if use_short_phase and short_epochs > 0:
        if short_epochs >= num_train_epochs:
            raise CurriculumError(
                f"curriculum.short_epochs={short_epochs} must be smaller than "
                f"algorithm.num_train_epochs={num_train_epochs}"
            )
        phases = (
            Phase("short", split.short, short_epochs),
            Phase("full", split.train, num_train_epochs - short_epochs),
        )
    else:
        phases = (Phase("full", split.train, num_train_epochs),)
    return TrainingSchedule(tuple(phases), num_generations, rollout_buffer_size, eval_every_epochs)
