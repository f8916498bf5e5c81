"""Evaluation: one greedy joint action per eval row, scored by the shared reward and aggregated to eval/*.

Periodic evaluations use the fixed anchor panel (P1), so every point of the learning curve has the same
denominator. The terminal evaluation covers the whole eval pool: its first panel forms the final eval/*
point, and the full-pool aggregate (eval_full/*) and per-sample details go to `eval_final.json` only.
Results are logged and returned; nothing here selects a stage or a checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from tqdm.auto import tqdm

from travel.io import write_json_atomic
from travel.logging.eval_aggregation import anchor_and_full_metrics, sample_record

if TYPE_CHECKING:
    from travel.algorithms.rollout import JointRollout, JointRolloutSampler
    from travel.data.row import TravelRow

EVAL_FINAL_FILE = "eval_final.json"


@dataclass(frozen=True)
class EvalPoint:
    env_step: int
    metrics: dict[str, float]  # eval/* (the anchor panel); the terminal point adds eval_full/*
    samples: list[dict[str, Any]] = field(repr=False)
    terminal: bool = False

    @property
    def public(self) -> dict[str, float]:
        return {key: value for key, value in self.metrics.items() if key.startswith("eval/")}

    @property
    def full(self) -> dict[str, float]:
        return {key: value for key, value in self.metrics.items() if key.startswith("eval_full/")}


def _sample_detail(index: int, panel_size: int, rollout: "JointRollout") -> dict[str, Any]:
    row, result = rollout.row, rollout.results[0]
    return {
        "panel": index // panel_size + 1,
        "source_index": row.source_index,
        "id": row.id,
        "days": row.days,
        "level": row.level,
        "reward": float(result.reward),
        "metrics": {key: float(result.metrics[key]) for key in sorted(result.metrics)},
        "texts": list(rollout.joint_texts(0)),
    }


def eval_rows_per_call_option(value: Any) -> int:
    """generation.eval_rows_per_call checked: a positive int."""
    if int(value) < 1:
        raise ValueError(f"generation.eval_rows_per_call={value}: must be >= 1")
    return int(value)


class Evaluator:
    """Runs and logs evaluations through the rollout seam without advancing the training env_step."""

    def __init__(
        self,
        sampler: "JointRolloutSampler",
        *,
        anchor_rows: Sequence["TravelRow"],
        eval_rows: Sequence["TravelRow"],
        panel_size: int,
        tracker: Any = None,
        greedy: bool = True,
        progress: bool = True,
        rows_per_call: int = 1,
    ):
        if not anchor_rows:
            raise ValueError("curriculum.eval_per_cell: evaluation needs a non-empty anchor panel")
        if tuple(eval_rows[: len(anchor_rows)]) != tuple(anchor_rows):
            raise ValueError("the anchor panel must be the first panel of the eval rows")
        self.sampler = sampler
        self.rows_per_call = eval_rows_per_call_option(rows_per_call)
        self.anchor_rows = tuple(anchor_rows)
        self.eval_rows = tuple(eval_rows)
        self.panel_size = panel_size
        self.tracker = tracker
        self.greedy = greedy
        self.progress = progress
        self.history: list[EvalPoint] = []

    def evaluate(self, rows: Sequence["TravelRow"], env_step: int, *, terminal: bool = False) -> EvalPoint:
        samples, records = [], []
        label = "final eval" if terminal else "eval"
        # `rows_per_call` rows per generation call; 1 (the default) decodes each row alone, as the reference
        # evaluation does (greedy results can differ in the last bits across batch shapes on a GPU).
        with tqdm(total=len(rows), desc=f"{label} @ {env_step}", leave=False, disable=not self.progress) as bar:
            for start in range(0, len(rows), self.rows_per_call):
                chunk = rows[start : start + self.rows_per_call]
                for rollout in self.sampler.rollouts(chunk, 1, greedy=self.greedy, count_env_steps=False):
                    records.append(sample_record(rollout.results[0]))
                    samples.append(_sample_detail(len(samples), self.panel_size, rollout))
                bar.update(len(chunk))
        point = EvalPoint(env_step, anchor_and_full_metrics(records, self.panel_size), samples, terminal)
        if self.tracker is not None:
            self.tracker.log(point.public, env_step=env_step)
        self.history.append(point)
        return point

    def history_state(self) -> list[dict[str, Any]]:
        """The evaluations so far as JSON records (what a checkpoint keeps)."""
        return [
            {"env_step": p.env_step, "metrics": p.metrics, "samples": p.samples, "terminal": p.terminal} for p in self.history
        ]

    def restore_history(self, records: Sequence[dict[str, Any]]) -> None:
        self.history = [
            EvalPoint(int(r["env_step"]), dict(r["metrics"]), list(r["samples"]), bool(r["terminal"])) for r in records
        ]

    def periodic(self, env_step: int) -> EvalPoint:
        """The anchor panel, greedy: one point of the fixed-anchor learning curve."""
        return self.evaluate(self.anchor_rows, env_step)

    def terminal(self, env_step: int, run_dir: str | Path | None = None) -> EvalPoint:
        """Every eval row; the first panel is the final eval/* point, the full pool goes to eval_final.json."""
        point = self.evaluate(self.eval_rows, env_step, terminal=True)
        if run_dir is not None:
            write_eval_final(point, Path(run_dir) / EVAL_FINAL_FILE, self.panel_size)
        return point


def write_eval_final(point: EvalPoint, path: Path, panel_size: int) -> None:
    full = point.full or {key.replace("eval/", "eval_full/", 1): value for key, value in point.public.items()}
    payload = {
        "env_step": point.env_step,
        "num_rows": len(point.samples),
        "anchor_rows": min(panel_size, len(point.samples)),
        "eval": point.public,
        "eval_full": full,
        "samples": point.samples,
    }
    write_json_atomic(path, payload, indent=2)
