"""Iteration reward distributions of the iterative preference algorithms, and their iter/* log surface.

After each iteration's collection and selection: histograms of the raw task reward of the target and
comparator candidates, and of the selected (trained-on) pairs' members by the pool they came from. 16 fixed
bins over the task reward's declared range (edges = linspace(min, max, 17), values clipped into the range,
numpy.histogram), not learned reward-model scores. The JSON goes to
`<run dir>/reward_distributions/iteration_NNNN.json` every iteration, with or without W&B. The Tracker logs
the iter/* scalars against iter/current_iteration; with W&B the two distributions also go up as small
inline SVG plots (target orange, comparator grey).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence

import numpy as np

from travel.algorithms.preference.batch import COMPARATOR, TARGET
from travel.io import write_json_atomic

if TYPE_CHECKING:
    from travel.algorithms.preference.batch import PreferenceBatch
    from travel.logging.tracker import Tracker

NUM_BINS = 16
DISTRIBUTION_DIR = "reward_distributions"
TARGET_COLOUR, COMPARATOR_COLOUR = "#e87030", "#6e6e6e"
PLOT_WIDTH, PLOT_HEIGHT = 240, 80


def bin_edges(reward_range: Sequence[float], num_bins: int = NUM_BINS) -> np.ndarray:
    low, high = float(reward_range[0]), float(reward_range[1])
    if not low < high:
        raise ValueError(f"reward range {list(reward_range)}: the minimum must be below the maximum")
    return np.linspace(low, high, num_bins + 1)


def series(values: Iterable[float], reward_range: Sequence[float], num_bins: int = NUM_BINS) -> dict[str, Any]:
    """{sample_count, mean, counts, raw_rewards} of raw rewards; out-of-range values count in the end bins."""
    raw = [float(v) for v in values]
    clipped = np.clip(np.asarray(raw, dtype=float), float(reward_range[0]), float(reward_range[1]))
    counts, _ = np.histogram(clipped, bins=bin_edges(reward_range, num_bins))
    return {
        "sample_count": len(raw),
        "mean": math.fsum(raw) / len(raw) if raw else None,
        "counts": [int(c) for c in counts],
        "raw_rewards": raw,
    }


def selected_rewards(batch: "PreferenceBatch") -> tuple[list[float], list[float]]:
    """The rewards of the pairs' members, split by the pool each came from (target, comparator)."""

    target, comparator = [], []
    for pair in batch:
        target += pair.pool_rewards(TARGET)
        comparator += pair.pool_rewards(COMPARATOR)
    return target, comparator


def iteration_distribution(
    iteration: int,
    target_rewards: Sequence[float],
    comparator_rewards: Sequence[float],
    selected: "PreferenceBatch",
    reward_range: Sequence[float],
    num_bins: int = NUM_BINS,
) -> dict[str, Any]:
    """The JSON payload of one iteration (docs/algorithms.md "Iteration logging and reward distributions")."""
    edges = bin_edges(reward_range, num_bins)
    chosen_target, chosen_comparator = selected_rewards(selected)
    return {
        "iteration": int(iteration),
        "reward_min": float(reward_range[0]),
        "reward_max": float(reward_range[1]),
        "num_bins": num_bins,
        "bin_edges": [float(e) for e in edges],
        "bin_centers": [float(c) for c in (edges[:-1] + edges[1:]) / 2],
        "pair_count": len(selected),
        "candidate": {
            "target": series(target_rewards, reward_range, num_bins),
            "comparator": series(comparator_rewards, reward_range, num_bins),
        },
        "selected": {
            "target": series(chosen_target, reward_range, num_bins),
            "comparator": series(chosen_comparator, reward_range, num_bins),
        },
    }


def distribution_path(run_dir: str | Path, iteration: int) -> Path:
    return Path(run_dir) / DISTRIBUTION_DIR / f"iteration_{iteration:04d}.json"


def write_distribution(run_dir: str | Path, payload: dict[str, Any]) -> Path:
    return write_json_atomic(distribution_path(run_dir, payload["iteration"]), payload)


# ---- iter/* surface -------------------------------------------------------------------------------


def iteration_scalars(
    iteration: int, new_pairs: int, total_pairs: int, train_pairs: int, payload: Optional[dict[str, Any]] = None
) -> dict[str, float]:
    """iter/* counters, plus the distribution summaries when `payload` is given."""
    scalars: dict[str, float] = {
        "iter/current_iteration": iteration,
        "iter/current_preference_pairs": new_pairs,
        "iter/total_preference_pairs": total_pairs,
        "iter/train_preference_pairs": train_pairs,
    }
    if payload is not None:
        for section, prefix in (
            ("candidate", "iter/reward_distribution"),
            ("selected", "iter/selected_reward_distribution"),
        ):
            target, comparator = payload[section]["target"], payload[section]["comparator"]
            scalars[f"{prefix}/current_iteration"] = iteration
            if section == "selected":
                scalars[f"{prefix}/pair_count"] = payload["pair_count"]
            scalars[f"{prefix}/target_sample_count"] = target["sample_count"]
            scalars[f"{prefix}/comparator_sample_count"] = comparator["sample_count"]
            # an empty series has no mean; the key is left out rather than logged as NaN
            for name, values in (("target", target), ("comparator", comparator)):
                if values["mean"] is not None:
                    scalars[f"{prefix}/{name}_mean"] = values["mean"]
    return scalars


def _points(counts: Sequence[int], peak: int) -> list[tuple[float, float]]:
    step = PLOT_WIDTH / len(counts)
    return [((i + 0.5) * step, PLOT_HEIGHT - 2 - (PLOT_HEIGHT - 4) * c / peak) for i, c in enumerate(counts)]


def svg_plot(section: dict[str, Any], style: str) -> str:
    """A 240x80 inline SVG of target vs comparator counts per bin: `line` or `bar`."""
    target, comparator = section["target"]["counts"], section["comparator"]["counts"]
    peak = max([*target, *comparator, 1])
    shapes = []
    if style == "line":
        for counts, colour in ((comparator, COMPARATOR_COLOUR), (target, TARGET_COLOUR)):
            points = " ".join(f"{x:.1f},{y:.1f}" for x, y in _points(counts, peak))
            shapes.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>')
    elif style == "bar":
        step = PLOT_WIDTH / len(target)
        for offset, counts, colour in ((0.0, target, TARGET_COLOUR), (0.5, comparator, COMPARATOR_COLOUR)):
            for i, c in enumerate(counts):
                height = (PLOT_HEIGHT - 4) * c / peak
                shapes.append(
                    f'<rect x="{i * step + offset * step:.1f}" y="{PLOT_HEIGHT - 2 - height:.1f}" '
                    f'width="{step / 2:.1f}" height="{height:.1f}" fill="{colour}"/>'
                )
    else:
        raise ValueError(f"plot style {style!r}: choose line or bar")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{PLOT_WIDTH}" height="{PLOT_HEIGHT}" '
        f'viewBox="0 0 {PLOT_WIDTH} {PLOT_HEIGHT}">{"".join(shapes)}</svg>'
    )


def iteration_plots(payload: dict[str, Any]) -> dict[str, str]:
    """iter/... plot keys -> SVG text for the candidate and selected distributions."""
    tag = f"iteration_{payload['iteration']:04d}"
    plots = {}
    for section, prefix in (
        ("candidate", "iter/reward_distribution"),
        ("selected", "iter/selected_reward_distribution"),
    ):
        for style in ("line", "bar"):
            plots[f"{prefix}/{tag}/{style}_plot"] = svg_plot(payload[section], style)
    return plots


def log_iteration(
    tracker: "Tracker",
    *,
    env_step: int,
    iteration: int,
    new_pairs: int,
    total_pairs: int,
    selected: "PreferenceBatch",
    target_rewards: Sequence[float],
    comparator_rewards: Sequence[float],
    reward_range: Sequence[float],
    run_dir: str | Path,
    log_distribution: bool = True,
) -> Optional[Path]:
    """Write the iteration's distribution JSON and log its iter/* surface; returns the JSON path.

    With `log_distribution=False` only the counters are logged and no file is written.
    """
    payload, path = None, None
    if log_distribution:
        payload = iteration_distribution(iteration, target_rewards, comparator_rewards, selected, reward_range)
        path = write_distribution(run_dir, payload)
    tracker.log(iteration_scalars(iteration, new_pairs, total_pairs, len(selected), payload), env_step=env_step)
    if payload is not None and tracker.wandb_run is not None:
        import wandb

        plots = {key: wandb.Html(svg, inject=False) for key, svg in iteration_plots(payload).items()}
        tracker.log_media(plots, env_step=env_step, iteration=iteration)
    return path
