"""The training diagnostics table: what a run's `train/*` records say about why it learns or does not.

A curve that stays flat has a reason the training records show: a group whose candidates all score alike gives
MAGRPO no advantage (`reward_group_std`), a policy that writes one action K times gives no spread
(`distinct_candidate_share`), a collapsed entropy stops exploration, a vanishing gradient norm stops the update,
and DPO pairs that are already ranked right (`dpo_preference_accuracy` near 1, a large `dpo_joint_delta`) give
little gradient. Each diagnostic is shown as early -> late: the mean of the first and of the last quarter of its
records (at least one record each), in the order the run logged them; a diagnostic logged once shows its value.
Runs are grouped into one table per set of diagnostics they logged (MAGRPO's, DPO's, MARLHF's).
"""

from __future__ import annotations

import statistics
from typing import Sequence

from travel.report.runs import RunSummary

# The train/* series shown, in this order, where a run logged them (MARLHF's online phase logs MAGRPO's, its
# train/reward then being the learned reward model's score).
DIAGNOSTICS = (
    "reward",
    "reward_group_std",
    "distinct_candidate_share",
    "nonzero_advantage_rate",
    "policy_entropy_agent_0",
    "policy_entropy_agent_1",
    "dpo_loss",
    "dpo_preference_accuracy",
    "dpo_joint_delta",
    "pair_reward_gap",
    "reward_model_loss",
    "reward_model_accuracy",
    "grad_norm_agent_0",
    "grad_norm_agent_1",
)


def early_late(values: Sequence[float]) -> tuple[float, float]:
    """The mean of the first and of the last quarter of `values` (at least one value each)."""
    if not values:
        raise ValueError("no values")
    quarter = max(1, len(values) // 4)
    return statistics.fmean(values[:quarter]), statistics.fmean(values[-quarter:])


def cell(values: Sequence[float]) -> str:
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:.3g}"
    early, late = early_late(values)
    return f"{early:.3g} → {late:.3g}"


def diagnostics_markdown(runs: Sequence[RunSummary]) -> list[str]:
    """The diagnostics section's Markdown lines: one table per set of diagnostics logged, a row per complete run."""
    complete = sorted((r for r in runs if r.complete), key=lambda r: (r.group.label(), r.seed))
    tables: dict[tuple[str, ...], list[RunSummary]] = {}
    for run in complete:
        shown = tuple(name for name in DIAGNOSTICS if run.series.get(name))
        if shown:
            tables.setdefault(shown, []).append(run)
    lines = ["", "## Training diagnostics (train/* records, early → late: the mean of their first and last quarter)"]
    if not tables:
        return lines + ["", "none logged"]
    for shown, members in tables.items():
        lines += ["", "| run | group | seed | " + " | ".join(shown) + " |", "| --- | --- | --- | " + " | ".join("---" for _ in shown) + " |"]
        for run in members:
            cells = " | ".join(cell(run.series[name]) for name in shown)
            lines.append(f"| {run.path.name} | {run.group.label()} | {run.seed} | {cells} |")
    return lines
