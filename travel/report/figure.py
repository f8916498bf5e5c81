"""The report's figure: each group's fixed-anchor curves against env step, the mean over seeds with a band of
one standard deviation, one panel per metric, each panel's y axis scaled to its data."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Sequence

from travel.logging.report import fit_y_axis
from travel.report.runs import RunSummary

FIGURE_METRICS = ("reward", "reference_plan_success", "collaboration_success", "required_grounded_recall")


def group_curve(runs: Sequence[RunSummary], metric: str) -> tuple[list[int], list[float], list[float]]:
    """(env steps, mean, std) over the runs' fixed-anchor points at the env steps every run has."""
    common = sorted(set.intersection(*(set(step for step, _ in r.curve) for r in runs)))
    points = [{step: values[metric] for step, values in r.curve if metric in values} for r in runs]
    steps = [s for s in common if all(s in p for p in points)]
    means = [statistics.fmean(p[s] for p in points) for s in steps]
    stds = [statistics.stdev([p[s] for p in points]) if len(points) > 1 else 0.0 for s in steps]
    return steps, means, stds


def plot_groups(runs: Sequence[RunSummary], path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    complete = [r for r in runs if r.complete]
    groups: dict[str, list[RunSummary]] = {}
    for run in complete:
        groups.setdefault(run.group.label(), []).append(run)
    metrics = [m for m in FIGURE_METRICS if all(m in r.final for r in complete)]
    figure, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.6), squeeze=False)
    for axis, metric in zip(axes[0], metrics):
        shown: list[float] = []
        for index, (label, members) in enumerate(sorted(groups.items())):
            steps, means, stds = group_curve(members, metric)
            line = axis.plot(steps, means, marker="o", markersize=3, linestyle=("-", "--", ":", "-.")[index % 4],
                             label=f"{label} (n={len(members)})")[0]
            low, high = [m - s for m, s in zip(means, stds)], [m + s for m, s in zip(means, stds)]
            axis.fill_between(steps, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
            shown += low + high
        fit_y_axis(axis, shown)
        axis.set_title(metric, fontsize=10)
        axis.set_xlabel("env step")
        axis.grid(alpha=0.3)
    axes[0][0].set_ylabel("fixed anchor, mean ± std over seeds")
    axes[0][-1].legend(fontsize=7, loc="best")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
