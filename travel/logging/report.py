"""End-of-run report: the initial / final / delta table of the main metrics and a PNG of the fixed-anchor
eval curve with the run's training curves."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from travel.io import write_text_atomic

# docs/reward.md "Main table": what the main table reports at least, in its order.
MAIN_TABLE_METRICS: tuple[str, ...] = (
    "reward",
    "reference_plan_delivery",
    "required_plan_completion",
    "reference_commonsense_micro",
    "reference_hard_micro",
    "reference_plan_success",
    "team_action_success",
    "collaboration_success",
    "required_cooperative_contribution",
    "required_grounded_recall",
    "entity_grounding_precision",
    "required_cost_completeness",
    "reference_budget_soft",
    "reference_budget_pass",
)
# The curve plot: the reward and a few success / progress metrics.
CURVE_METRICS: tuple[str, ...] = (
    "reward",
    "action_validity",
    "required_grounded_recall",
    "required_plan_completion",
    "reference_plan_success",
    "collaboration_success",
)
CURVE_FILE = "eval_curve.png"


def initial_final_delta(initial: Mapping[str, float], final: Mapping[str, float]) -> list[tuple[str, float, float, float]]:
    """(metric, initial, final, final - initial) for each main-table metric, read from eval/* mappings."""
    rows = []
    for name in MAIN_TABLE_METRICS:
        key = f"eval/{name}"
        if key not in initial or key not in final:
            raise KeyError(f"eval point lacks {key!r}")
        rows.append((name, float(initial[key]), float(final[key]), float(final[key]) - float(initial[key])))
    return rows


def format_table(
    initial: Mapping[str, float], final: Mapping[str, float], *, initial_step: int, final_step: int
) -> str:
    rows = initial_final_delta(initial, final)
    width = max(len(name) for name, *_ in rows)
    header = f"{'metric':<{width}}  {'initial':>9}  {'final':>9}  {'delta':>9}"
    lines = [
        f"fixed-anchor evaluation: initial = env step {initial_step}, final = env step {final_step}",
        header,
        "-" * len(header),
    ]
    lines += [f"{name:<{width}}  {a:>9.4f}  {b:>9.4f}  {d:>+9.4f}" for name, a, b, d in rows]
    return "\n".join(lines)


def format_held_out_table(held_out: Mapping[str, Mapping], env_step: int) -> str:
    """The terminal evaluation's held-out groups (curriculum.held_out_eval) side by side: the main metrics, then
    each cell's rows and mean reward."""
    groups = list(held_out)
    width = max(len(name) for name in (*MAIN_TABLE_METRICS, "rows"))
    column = max(12, *(len(group) for group in groups))
    header = f"{'metric':<{width}}" + "".join(f"  {group:>{column}}" for group in groups)
    lines = [
        f"held-out rows at env step {env_step} (greedy; in_curriculum includes the eval pool; not in eval/*)",
        header,
        "-" * len(header),
        f"{'rows':<{width}}" + "".join(f"  {held_out[g]['rows']:>{column}}" for g in groups),
    ]
    for name in MAIN_TABLE_METRICS:
        lines.append(f"{name:<{width}}" + "".join(f"  {held_out[g]['metrics'][name]:>{column}.4f}" for g in groups))
    cells = [(cell, g, info) for g in groups for cell, info in held_out[g]["cells"].items()]
    cell_width = max(len("cell"), *(len(cell) for cell, _, _ in cells))
    lines += ["", f"{'cell':<{cell_width}}  {'group':<{column}}  {'rows':>4}  {'reward':>8}"]
    lines += [f"{cell:<{cell_width}}  {g:<{column}}  {info['rows']:>4}  {info['reward']:>8.4f}" for cell, g, info in cells]
    return "\n".join(lines)


SUMMARY_FILE = "summary.md"


def write_summary(run_dir: str | Path, title: str, *tables: str) -> Path:
    """The run's initial / final / delta table (or a saved actors' evaluation), and any further tables (the
    held-out rows), as summary.md."""

    body = "\n".join(f"```text\n{table}\n```\n" for table in tables)
    return write_text_atomic(Path(run_dir) / SUMMARY_FILE, f"# {title}\n\n{body}")


def fit_y_axis(axis, values: Sequence[float], floor_span: float = 0.02) -> None:
    """Y-limits fitted to the data (at least `floor_span` wide), so small changes stay visible."""
    low, high = min(values), max(values)
    span = max(high - low, floor_span)
    middle = (low + high) / 2
    axis.set_ylim(middle - 0.6 * span, middle + 0.6 * span)


# MAGRPO's train reward and group spread; the iterative preference runs' per-iteration candidate rewards
TRAIN_CURVES = (
    "train/reward",
    "train/reward_group_std",
    "iter/reward_distribution/target_mean",
    "iter/reward_distribution/comparator_mean",
)
LOSS_PREFIXES = ("train/loss_agent_", "train/dpo_loss", "train/reward_model_loss")


def plot_eval_curve(
    points: Sequence[tuple[int, Mapping[str, float]]],
    path: str | Path,
    title: str = "",
    train_records: Sequence[Mapping[str, float]] = (),
) -> Path:
    """Panels against env_step, one marker per evaluation: eval/reward (its axis fitted to the data, the delta
    in the legend); the rates of CURVE_METRICS (distinct markers and line styles, each line lifted by a small
    offset so equal values stay visible); and, given the run's train/* records, train reward, group spread
    and each loss (iterative preference runs: each iteration's target and comparator candidate reward)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not points:
        raise ValueError("no eval points to plot")
    path = Path(path)
    steps = [step for step, _ in points]
    train = [r for r in train_records if any(key in r for key in TRAIN_CURVES) or any(k.startswith(LOSS_PREFIXES) for k in r)]
    rows = 3 if train else 2
    figure, axes = plt.subplots(
        rows, 1, figsize=(10, 3.2 * rows), dpi=120, sharex=True, gridspec_kw={"height_ratios": [1, 1.6, 1.2][:rows]}
    )
    top, middle = axes[0], axes[1]
    rewards = [float(m["eval/reward"]) for _, m in points]
    top.plot(steps, rewards, marker="o", color="#1f5fa8", label=f"reward (delta {rewards[-1] - rewards[0]:+.4f})")
    top.set_ylabel("eval/reward")
    fit_y_axis(top, rewards)
    top.grid(True, alpha=0.3)
    top.legend(loc="best", fontsize=8, frameon=False)
    top.set_title(title or "Fixed-anchor evaluation (greedy)")
    styles = ["-", "--", "-.", ":", "-", "--"]
    markers = ["s", "^", "D", "v", "x", "P"]
    for index, name in enumerate(name for name in CURVE_METRICS if name != "reward"):
        middle.plot(
            steps,
            [float(m[f"eval/{name}"]) + 0.008 * index for _, m in points],
            linestyle=styles[index % len(styles)],
            marker=markers[index % len(markers)],
            markersize=6 - index * 0.6,
            label=f"{name} (+{0.008 * index:.3f})" if index else name,
        )
    middle.set_ylabel("anchor-panel rate (lifted)")
    middle.set_ylim(-0.03, 1.08)
    middle.grid(True, alpha=0.3)
    middle.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    if train:
        bottom = axes[2]
        for key, color in zip(TRAIN_CURVES, ("#2a7f2a", "#b8860b", "#5b3fa0", "#c0398a")):
            pairs = [(r["env_step"], float(r[key])) for r in train if key in r]
            if pairs:
                bottom.plot(*zip(*pairs), marker=".", color=color, label=key)
        losses = bottom.twinx()
        for index, key in enumerate(sorted({k for r in train for k in r if k.startswith(LOSS_PREFIXES)})):
            pairs = [(r["env_step"], float(r[key])) for r in train if key in r]
            losses.plot(*zip(*pairs), linestyle=styles[index % len(styles)], color="#8b1a1a", alpha=0.8, label=key)
        losses.set_ylabel("loss")
        bottom.set_ylabel("train reward / spread")
        bottom.grid(True, alpha=0.3)
        handles = bottom.get_legend_handles_labels()[0] + losses.get_legend_handles_labels()[0]
        labels = bottom.get_legend_handles_labels()[1] + losses.get_legend_handles_labels()[1]
        bottom.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.08, 1.0), fontsize=8, frameon=False)
    axes[-1].set_xlabel("env_step (joint actions)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path
