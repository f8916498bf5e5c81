"""What a training run returns and counts: `TrainResult` (every trainer), `PreferenceCounts` (the preference
trainers' collection and pair counters) and `BudgetDrift`, raised when a run's counts leave the budget
mode=dry reported (travel/algorithms/core/budgets.py).

Counting units (docs/algorithms.md "Units"): collected candidates are joint candidates sampled to
label preferences (never env steps); preference pairs are the new non-tied pairs selected; trained pairs are
the pairs an update consumed (replayed pairs included); replayed pairs are those drawn from an earlier
iteration's shard.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from travel.algorithms.core.evaluation import EvalPoint


class BudgetDrift(RuntimeError):
    """A training count left the dry run's budget or schedule."""


@dataclass
class PreferenceCounts:
    collected_candidates: int = 0
    preference_pairs: int = 0
    trained_pairs: int = 0
    replayed_pairs: int = 0
    reward_model_updates: int = 0
    iterations: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


@dataclass
class TrainResult:
    """Env steps, optimizer updates per agent and evaluation points of a finished run; `counts` for the
    preference algorithms."""

    env_steps: int
    optimizer_updates: list[int]
    evaluations: list["EvalPoint"] = field(repr=False)
    epochs: int = 0
    counts: Optional[PreferenceCounts] = None

    @property
    def eval_env_steps(self) -> list[int]:
        return [point.env_step for point in self.evaluations]
