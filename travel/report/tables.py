"""The report's tables: each complete run's initial / final / delta of the main metrics, and per group
(algorithm x comparator x actor layout) their mean and standard deviation over seeds; as Markdown and CSV.

The standard deviation is the sample one (n - 1); a group of one run has none (empty in CSV, "n/a" in
Markdown). Incomplete runs are their own table and enter no mean. A group "learns" when it has two seeds or more
and at every seed the final anchor reward is above the initial one and the mean of the last two points is above
the first.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from travel.logging.report import MAIN_TABLE_METRICS
from travel.report.diagnostics import diagnostics_markdown
from travel.report.runs import Group, RunSummary

# The Markdown group table's columns (every main metric is in the CSV files).
HEADLINE_METRICS = ("reward", "reference_plan_success", "collaboration_success", "required_grounded_recall", "action_validity")


@dataclass(frozen=True)
class Spread:
    mean: float
    std: float  # NaN for one run

    @staticmethod
    def of(values: Sequence[float]) -> "Spread":
        return Spread(statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else math.nan)

    def markdown(self, signed: bool = False) -> str:
        mean = f"{self.mean:+.4f}" if signed else f"{self.mean:.4f}"
        return mean + (" ± n/a" if math.isnan(self.std) else f" ± {self.std:.4f}")


@dataclass(frozen=True)
class GroupRow:
    group: Group
    seeds: tuple[int, ...]
    initial: dict[str, Spread]
    final: dict[str, Spread]
    delta: dict[str, Spread]
    learns: str


def metric_names(runs: Sequence[RunSummary]) -> list[str]:
    """The main metrics every complete run reports, in the main table's order, then the headline extras."""
    names = [m for m in (*MAIN_TABLE_METRICS, *HEADLINE_METRICS) if all(m in r.initial and m in r.final for r in runs)]
    return list(dict.fromkeys(names))


def run_learns(run: RunSummary) -> bool:
    """The final anchor reward above the initial, and the mean of the curve's last two points above its first."""
    rewards = [values["reward"] for _, values in run.curve]
    return rewards[-1] > rewards[0] and statistics.fmean(rewards[-2:]) > rewards[0]


def learns(members: Sequence[RunSummary]) -> str:
    """The verdict on a group's complete runs: yes, no (naming the seeds that fail) or n/a (one seed)."""
    if len(members) < 2:
        return "n/a (one seed)"
    failing = [str(r.seed) for r in members if not run_learns(r)]
    return "yes" if not failing else f"no (seed {', '.join(failing)})"


def group_rows(runs: Sequence[RunSummary]) -> list[GroupRow]:
    complete = [r for r in runs if r.complete]
    names = metric_names(complete)
    by_group: dict[Group, list[RunSummary]] = {}
    for run in complete:
        by_group.setdefault(run.group, []).append(run)
    rows = []
    for group in sorted(by_group, key=lambda g: (g.algorithm, g.comparator, g.layout, g.values)):
        members = sorted(by_group[group], key=lambda r: r.seed)
        rows.append(
            GroupRow(
                group=group,
                seeds=tuple(r.seed for r in members),
                initial={m: Spread.of([r.initial[m] for r in members]) for m in names},
                final={m: Spread.of([r.final[m] for r in members]) for m in names},
                delta={m: Spread.of([r.final[m] - r.initial[m] for r in members]) for m in names},
                learns=learns(members),
            )
        )
    return rows


def _csv(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def _number(value: float) -> str:
    return "" if math.isnan(value) else repr(value)


def runs_csv(runs: Sequence[RunSummary]) -> str:
    """One row per complete run and main metric."""
    complete = [r for r in runs if r.complete]
    names = metric_names(complete)
    rows = [
        [str(r.path), r.group.algorithm, r.group.comparator, r.group.layout, r.seed, m,
         repr(r.initial[m]), repr(r.final[m]), repr(r.final[m] - r.initial[m])]
        for r in complete for m in names
    ]
    return _csv(["run", "algorithm", "comparator", "layout", "seed", "metric", "initial", "final", "delta"], rows)


def groups_csv(rows: Sequence[GroupRow]) -> str:
    """One row per group and main metric: the number of seeds, and mean and std of initial, final and delta."""
    out = []
    for row in rows:
        for m in row.final:
            spreads = (row.initial[m], row.final[m], row.delta[m])
            out.append([row.group.algorithm, row.group.comparator, row.group.layout, len(row.seeds), m,
                        *[_number(x) for s in spreads for x in (s.mean, s.std)]])
    header = ["algorithm", "comparator", "layout", "seeds", "metric",
              "initial_mean", "initial_std", "final_mean", "final_std", "delta_mean", "delta_std"]
    return _csv(header, out)


HELD_OUT_METRICS = ("reward", "required_grounded_recall", "reference_commonsense_micro", "reference_plan_success")


def held_out_markdown(runs: Sequence[RunSummary]) -> list[str]:
    """Mean ± std over seeds of the terminal evaluation's held-out groups, one table per group; [] when no complete
    run evaluated held-out rows (curriculum.held_out_eval)."""
    complete = [r for r in runs if r.complete and r.held_out]
    lines: list[str] = []
    for name in dict.fromkeys(g for r in complete for g in r.held_out):
        members: dict[Group, list[RunSummary]] = {}
        for run in complete:
            if name in run.held_out:
                members.setdefault(run.group, []).append(run)
        rows_seen = sorted({run.held_out[name]["rows"] for runs_ in members.values() for run in runs_})
        lines += ["", f"## Held-out rows, {name.replace('_', ' ')} (terminal evaluation; {'/'.join(map(str, rows_seen))} rows)", ""]
        lines.append("| group | seeds | " + " | ".join(HELD_OUT_METRICS) + " |")
        lines.append("| --- | --- | " + " | ".join("---:" for _ in HELD_OUT_METRICS) + " |")
        for group in sorted(members, key=lambda g: (g.algorithm, g.comparator, g.layout, g.values)):
            group_runs = sorted(members[group], key=lambda r: r.seed)
            cells = [Spread.of([r.held_out[name]["metrics"][m] for r in group_runs]).markdown() for m in HELD_OUT_METRICS]
            lines.append(f"| {group.label()} | {', '.join(str(r.seed) for r in group_runs)} | " + " | ".join(cells) + " |")
    return lines


def markdown(runs: Sequence[RunSummary], rows: Sequence[GroupRow]) -> str:
    lines = ["## Mean ± std over seeds (fixed anchor; final, and final - initial)", ""]
    shown = [m for m in HEADLINE_METRICS if rows and m in rows[0].final]
    lines.append("| group | seeds | learns | " + " | ".join(f"{m} final | {m} delta" for m in shown) + " |")
    lines.append("| --- | --- | --- | " + " | ".join("---: | ---:" for _ in shown) + " |")
    for row in rows:
        cells = [f"{row.final[m].markdown()} | {row.delta[m].markdown(signed=True)}" for m in shown]
        lines.append(f"| {row.group.label()} | {', '.join(map(str, row.seeds))} | {row.learns} | " + " | ".join(cells) + " |")
    repeated = [f"seed {seed} appears {row.seeds.count(seed)} times in {row.group.label()}"
                for row in rows for seed in sorted(set(row.seeds)) if row.seeds.count(seed) > 1]
    if repeated:
        lines += ["", "Repeated seeds (reruns of one configuration, each counted): " + "; ".join(repeated) + "."]
    lines += held_out_markdown(runs)
    lines += ["", "## Runs (reward on the fixed anchor; card and wall minutes from each run's run.json; 'at once': runs that shared the card)", "",
              "| run | group | seed | initial | final | delta | card | minutes | command |",
              "| --- | --- | --- | ---: | ---: | ---: | --- | ---: | --- |"]
    for run in sorted((r for r in runs if r.complete), key=lambda r: (r.group.label(), r.seed)):
        a, b = run.initial["reward"], run.final["reward"]
        minutes = "n/a" if run.device_minutes is None else f"{run.device_minutes:.1f}"
        minutes += f" ({run.runs_together} at once)" if run.runs_together > 1 else ""
        command = f"`{run.command}`" if run.command else "n/a"
        lines.append(f"| {run.path.name} | {run.group.label()} | {run.seed} | {a:.4f} | {b:.4f} | {b - a:+.4f} "
                     f"| {run.devices} | {minutes} | {command} |")
    lines += diagnostics_markdown(runs)
    incomplete = [r for r in runs if not r.complete]
    lines += ["", "## Incomplete runs (in no mean)", ""]
    if incomplete:
        lines += ["| run | group | seed | status | error |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {r.path} | {r.group.label()} | {r.seed} | {r.status} | {r.error.replace('|', '/')} |" for r in incomplete]
    else:
        lines.append("none")
    return "\n".join(lines) + "\n"
