"""End-of-run report: the initial / final / delta table of SEED.md's main metrics and a PNG of the
fixed-anchor eval curve."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

# SEED.md "End metrics": what the main table reports at least, in its order.
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


SUMMARY_FILE = "summary.md"


def write_summary(run_dir: str | Path, title: str, table: str) -> Path:
    """The run's initial / final / delta table (or a saved actors' evaluation) as summary.md."""
    from travel.io import write_text_atomic

    return write_text_atomic(Path(run_dir) / SUMMARY_FILE, f"# {title}\n\n```text\n{table}\n```\n")


def plot_eval_curve(points: Sequence[tuple[int, Mapping[str, float]]], path: str | Path, title: str = "") -> Path:
    """Two panels against env_step, one marker per evaluation: eval/reward on top, the rates of
    CURVE_METRICS below (distinct markers and line styles, so equal values stay visible)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not points:
        raise ValueError("no eval points to plot")
    path = Path(path)
    steps = [step for step, _ in points]
    figure, (top, bottom) = plt.subplots(
        2, 1, figsize=(10, 6.5), dpi=120, sharex=True, gridspec_kw={"height_ratios": [1, 1.6]}
    )
    top.plot(steps, [float(m["eval/reward"]) for _, m in points], marker="o", color="#1f5fa8", label="reward")
    top.set_ylabel("eval/reward")
    top.set_ylim(-0.27, 1.02)
    top.axhline(0.0, color="grey", linewidth=0.6)
    top.grid(True, alpha=0.3)
    top.set_title(title or "Fixed-anchor evaluation (greedy)")
    styles = ["-", "--", "-.", ":", "-", "--"]
    markers = ["s", "^", "D", "v", "x", "P"]
    for index, name in enumerate(name for name in CURVE_METRICS if name != "reward"):
        bottom.plot(
            steps,
            [float(m[f"eval/{name}"]) for _, m in points],
            linestyle=styles[index % len(styles)],
            marker=markers[index % len(markers)],
            markersize=6 - index * 0.6,
            label=name,
        )
    bottom.set_ylabel("anchor-panel rate")
    bottom.set_xlabel("env_step (joint actions)")
    bottom.set_ylim(-0.03, 1.03)
    bottom.grid(True, alpha=0.3)
    bottom.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path
