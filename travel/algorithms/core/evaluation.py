"""Evaluation: one greedy joint action per eval row, scored by the shared reward and aggregated to eval/*.

Periodic evaluations use the fixed anchor panel (P1), so every point of the learning curve has the same
denominator. The terminal evaluation covers the whole eval pool: its first panel forms the final eval/*
point, and the full-pool aggregate (eval_full/*) and per-sample details go to `eval_final.json` only. With
held-out rows (curriculum.held_out_eval) it also scores every row the run did not train on, and reports them
apart, by group and cell, in `eval_final.json` and summary.md, never under eval/*. `evaluations.json` keeps
every evaluation's actions for the plan pages (travel/report/html.py).
Results are logged and returned; nothing here selects a stage or a checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from tqdm.auto import tqdm

from travel.io import write_json_atomic
from travel.data.curriculum import HELD_OUT_GROUPS, IN_CURRICULUM, cell_name
from travel.logging.eval_aggregation import aggregate_records, anchor_and_full_metrics, public_eval_metrics, sample_record

if TYPE_CHECKING:
    from travel.algorithms.core.rollout import JointRollout, JointRolloutSampler
    from travel.data.row import TravelRow

EVAL_FINAL_FILE = "eval_final.json"
EVALUATIONS_FILE = "evaluations.json"


@dataclass(frozen=True)
class EvalPoint:
    env_step: int
    metrics: dict[str, float]  # eval/* (the anchor panel); the terminal point adds eval_full/*
    samples: list[dict[str, Any]] = field(repr=False)
    terminal: bool = False
    # the terminal point with held-out rows: group -> {"rows", "metrics", "cells"}, and those rows' samples
    held_out: dict[str, Any] = field(default_factory=dict, repr=False)
    held_out_samples: list[dict[str, Any]] = field(default_factory=list, repr=False)

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
        "cell": cell_name(row),
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
        held_out: Mapping[str, Sequence["TravelRow"]] | None = None,
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
        self.held_out = {group: tuple((held_out or {}).get(group, ())) for group in HELD_OUT_GROUPS}
        self.history: list[EvalPoint] = []

    def _score(self, rows: Sequence["TravelRow"], label: str) -> tuple[list[dict[str, float]], list[dict[str, Any]]]:
        """One greedy joint action per row: the aggregation records and the per-sample details."""
        samples, records = [], []
        # `rows_per_call` rows per generation call; 1 decodes each row alone, as the reference evaluation does
        # (greedy results can differ in the last bits across batch shapes on a GPU).
        with tqdm(total=len(rows), desc=label, leave=False, disable=not self.progress) as bar:
            for start in range(0, len(rows), self.rows_per_call):
                chunk = rows[start : start + self.rows_per_call]
                for rollout in self.sampler.rollouts(chunk, 1, greedy=self.greedy, count_env_steps=False):
                    records.append(sample_record(rollout.results[0]))
                    samples.append(_sample_detail(len(samples), self.panel_size, rollout))
                bar.update(len(chunk))
        return records, samples

    def evaluate(self, rows: Sequence["TravelRow"], env_step: int, *, terminal: bool = False) -> EvalPoint:
        return self._evaluate(rows, env_step, terminal)[0]

    def _evaluate(
        self, rows: Sequence["TravelRow"], env_step: int, terminal: bool
    ) -> tuple[EvalPoint, list[dict[str, float]]]:
        """The logged point, and its samples' aggregation records."""
        records, samples = self._score(rows, f"{'final eval' if terminal else 'eval'} @ {env_step}")
        point = EvalPoint(env_step, anchor_and_full_metrics(records, self.panel_size), samples, terminal)
        if self.tracker is not None:
            self.tracker.log(point.public, env_step=env_step)
        self.history.append(point)
        return point, records

    def _held_out(self, point: EvalPoint, eval_records: list[dict[str, float]], env_step: int) -> EvalPoint:
        """The terminal point with every held-out group scored: the eval pool counts as in-curriculum."""
        labelled = [(group, row) for group in HELD_OUT_GROUPS for row in self.held_out[group]]
        records, samples = self._score([row for _, row in labelled], f"held-out eval @ {env_step}")
        groups: dict[str, list[tuple[dict[str, float], dict[str, Any]]]] = {g: [] for g in HELD_OUT_GROUPS}
        groups[IN_CURRICULUM] = list(zip(eval_records, point.samples))
        for (group, _), record, sample in zip(labelled, records, samples):
            sample.update(panel=None, group=group)
            groups[group].append((record, sample))
        return replace(
            point,
            held_out={group: held_out_summary(scored) for group, scored in groups.items() if scored},
            held_out_samples=samples,
        )

    def history_state(self) -> list[dict[str, Any]]:
        """The evaluations so far as JSON records (what a checkpoint keeps)."""
        return [
            {
                "env_step": p.env_step,
                "metrics": p.metrics,
                "samples": p.samples,
                "terminal": p.terminal,
                "held_out": p.held_out,
                "held_out_samples": p.held_out_samples,
            }
            for p in self.history
        ]

    def restore_history(self, records: Sequence[dict[str, Any]]) -> None:
        self.history = [
            EvalPoint(
                int(r["env_step"]),
                dict(r["metrics"]),
                list(r["samples"]),
                bool(r["terminal"]),
                dict(r.get("held_out") or {}),
                list(r.get("held_out_samples") or ()),
            )
            for r in records
        ]

    def periodic(self, env_step: int) -> EvalPoint:
        """The anchor panel, greedy: one point of the fixed-anchor learning curve."""
        return self.evaluate(self.anchor_rows, env_step)

    def terminal(self, env_step: int, run_dir: str | Path | None = None) -> EvalPoint:
        """Every eval row; the first panel is the final eval/* point, the full pool goes to eval_final.json.
        With held-out rows, those too, apart from eval/*. Writes eval_final.json and evaluations.json."""
        point, eval_records = self._evaluate(self.eval_rows, env_step, terminal=True)
        if any(self.held_out.values()):
            point = self.history[-1] = self._held_out(point, eval_records, env_step)
        if run_dir is not None:
            write_eval_final(point, Path(run_dir) / EVAL_FINAL_FILE, self.panel_size)
            write_json_atomic(Path(run_dir) / EVALUATIONS_FILE, {"evaluations": self.history_state()}, indent=1)
        return point


def held_out_summary(scored: Sequence[tuple[dict[str, float], dict[str, Any]]]) -> dict[str, Any]:
    """One held-out group: its row count, the 17 public metrics over its rows (plain names) and, per cell,
    the rows and mean reward."""
    metrics = public_eval_metrics(aggregate_records([record for record, _ in scored]), "eval")
    cells: dict[str, list[float]] = {}
    for _, sample in scored:
        cells.setdefault(sample["cell"], []).append(sample["reward"])
    return {
        "rows": len(scored),
        "metrics": {key.split("/", 1)[1]: value for key, value in metrics.items()},
        "cells": {cell: {"rows": len(r), "reward": sum(r) / len(r)} for cell, r in sorted(cells.items())},
    }


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
    if point.held_out:
        payload.update(held_out=point.held_out, held_out_samples=point.held_out_samples)
    write_json_atomic(path, payload, indent=2)
