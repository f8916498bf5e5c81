"""`python -m travel.report RUN... --html`: one static page per run showing the plans its agents wrote.

From what a finished run saved (`evaluations.json`: every evaluation's joint actions, with their scores), each
page shows, for every anchor row: the request, its constraints and the route scaffold; the merged itinerary as
a day-by-field table at the first and the last evaluation side by side, each cell marked grounded, ungrounded,
empty by rule or in conflict; each commonsense and hard check with pass or fail and its soft score; and the
reward's terms. The itinerary is merged again from the saved texts (the merger is deterministic), against the
rows of the run's own data (`data.path` of its config, or `--data`). An index page links the runs.

The pages are plain HTML with inline CSS: no script, no network fetch, readable offline.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from travel.data.curriculum import ScalableCurriculum
from travel.data.module import DataModule
from travel.io import write_text_atomic
from travel.algorithms.core.evaluation import EVALUATIONS_FILE
from travel.report.runs import ReportError, RunSummary
from travel.reward.formula import COMPONENT_NAMES, PENALTY_NAMES
from travel.reward.joint import MERGE_RESULT_KEY, evaluate_joint_action

FIELD_LABELS = {
    "current_city": "current city",
    "transportation": "transportation",
    "breakfast": "breakfast",
    "attraction": "attraction",
    "lunch": "lunch",
    "dinner": "dinner",
    "accommodation": "accommodation",
}
# Each check's name, kind and what it asks (docs/reward.md "Plan evaluator").
CHECKS: tuple[tuple[str, str, str], ...] = (
    ("reasonable_route", "commonsense", "the days' cities follow the route scaffold, from the origin and back"),
    ("restaurant_diversity", "commonsense", "no restaurant is chosen twice"),
    ("attraction_diversity", "commonsense", "no attraction is chosen twice"),
    ("minimum_nights", "commonsense", "each accommodation is booked for at least its minimum nights"),
    ("transport_consistency", "commonsense", "transport entries exist, and self-driving is not mixed with flights or taxis"),
    ("within_current_city", "commonsense", "meals, attractions and lodging lie in the day's city"),
    ("within_reference", "commonsense", "values and cities come from the reference tables"),
    ("complete_information", "commonsense", "every slot is assigned and every required slot is filled"),
    ("budget", "hard", "the estimated cost is known and within the budget"),
    ("cuisine", "hard", "the meals serve every requested cuisine"),
    ("room_rule", "hard", "every accommodation allows what the request needs (house rules)"),
    ("room_type", "hard", "every accommodation has the requested room type"),
    ("transportation", "hard", "the transport modes respect the request's rule"),
)
CELL_CLASSES = {
    "grounded": "a value found in the reference tables, valid for its slot",
    "ungrounded": "a value the tables do not support, or a required slot left empty",
    "empty": "empty by rule: the slot is not required on this day",
    "conflict": "both agents wrote this slot with different values",
}
STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #1d1d1f; max-width: 110rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-top: 1px solid #ccc; padding-top: 1rem; }
h3 { font-size: 1rem; margin-bottom: 0.3rem; }
table { border-collapse: collapse; margin: 0.4rem 0 1rem; font-size: 0.85rem; }
th, td { border: 1px solid #bbb; padding: 0.25rem 0.45rem; vertical-align: top; text-align: left; }
th { background: #f0f0f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.plans { display: flex; gap: 1.5rem; flex-wrap: wrap; } .plans > div { flex: 1 1 40rem; }
table.itinerary td { max-width: 14rem; overflow-wrap: anywhere; }
.grounded { background: #d8f3dc; } .ungrounded { background: #ffd6d6; }
.empty { background: #f4f4f4; color: #888; } .conflict { background: #ffe8a3; }
td.pass { color: #146c2e; font-weight: 600; } td.fail { color: #b3261e; font-weight: 600; }
.query { background: #f7f7fa; padding: 0.5rem 0.75rem; border-left: 3px solid #888; }
.legend span { display: inline-block; padding: 0.1rem 0.5rem; margin-right: 0.5rem; border: 1px solid #bbb; }
"""


@dataclass(frozen=True)
class Evaluation:
    env_step: int
    samples: list[dict[str, Any]]  # the anchor rows' samples (panel 1)
    terminal: bool


def read_evaluations(run_dir: Path) -> list[Evaluation]:
    path = run_dir / EVALUATIONS_FILE
    if not path.is_file():
        raise ReportError(f"{path}: missing (written at the end of a training run; rerun it to see its plans)")
    try:
        records = json.loads(path.read_text(encoding="utf-8"))["evaluations"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ReportError(f"{path}: not an evaluations file ({exc})") from None
    return [
        Evaluation(int(r["env_step"]), [s for s in r["samples"] if s.get("panel") == 1], bool(r["terminal"]))
        for r in records
    ]


def load_rows(run_dir: Path, data_path: Optional[str]) -> dict[int, Any]:
    """source_index -> TravelRow of the run's data source (its config's, with `data_path` replacing data.path)."""
    import yaml
    from hydra.utils import instantiate

    config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    data = dict(config["data"])
    if data_path is not None:
        data["path"] = data_path
    try:
        source = instantiate(data)
        rows = DataModule(source, ScalableCurriculum()).rows
    except (OSError, ValueError) as exc:
        raise ReportError(f"{run_dir}: cannot read the run's rows from data.path={data.get('path')!r} ({exc}); give --data") from None
    return {row.source_index: row for row in rows}


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def cell_states(row: Any, texts: Sequence[str]) -> tuple[list[dict[str, Any]], dict[tuple[int, str], str]]:
    """The merged plan of a joint action and each slot's state (grounded, ungrounded, empty, conflict)."""

    detail = evaluate_joint_action(list(texts), row)
    merge = detail[MERGE_RESULT_KEY]
    conflicts = {tuple(slot) for slot in merge.conflict_slots or ()}
    required = set(row.required_slots)
    states = {}
    for plan_row in merge.plan:
        day = int(plan_row["day"])
        for field in FIELD_LABELS:
            slot, value = (day, field), str(plan_row.get(field, "-")).strip()
            if slot in conflicts:
                states[slot] = "conflict"
            elif value in ("", "-"):
                states[slot] = "ungrounded" if slot in required else "empty"
            else:
                states[slot] = "grounded" if detail["slot_validity"].get(slot) else "ungrounded"
    return [dict(plan_row) for plan_row in merge.plan], states


def itinerary_table(row: Any, sample: Mapping[str, Any], label: str) -> str:
    plan, states = cell_states(row, sample["texts"])
    head = "".join(f"<th>{_esc(name)}</th>" for name in FIELD_LABELS.values())
    lines = [
        f'<div><h3>{_esc(label)}: reward {sample["reward"]:.4f}</h3>',
        f'<table class="itinerary"><tr><th>day</th>{head}</tr>',
    ]
    for plan_row in plan:
        day = int(plan_row["day"])
        cells = "".join(
            f'<td class="{states[(day, field)]}" title="{_esc(CELL_CLASSES[states[(day, field)]])}">'
            f"{_esc(plan_row.get(field, '-'))}</td>"
            for field in FIELD_LABELS
        )
        lines.append(f"<tr><th>{day}</th>{cells}</tr>")
    lines.append("</table></div>")
    return "\n".join(lines)


def checks_table(first: Mapping[str, Any], last: Mapping[str, Any], steps: tuple[int, int]) -> str:
    def verdict(metrics: Mapping[str, float], name: str, kind: str) -> str:
        prefix = ("constraint" if kind == "commonsense" else "hard")
        passed, soft = metrics.get(f"{prefix}_pass/{name}"), metrics.get(f"{prefix}_soft/{name}")
        if passed is None:
            return '<td class="na">n/a</td>'
        word = "pass" if passed >= 1.0 else "fail"
        return f'<td class="{word}">{word} (soft {soft:.2f})</td>'

    lines = [
        '<table class="checks">',
        f"<tr><th>check</th><th>kind</th><th>env step {steps[0]}</th><th>env step {steps[1]}</th><th>what it asks</th></tr>",
    ]
    for name, kind, asks in CHECKS:
        first_cell, last_cell = verdict(first["metrics"], name, kind), verdict(last["metrics"], name, kind)
        if "n/a" in first_cell and "n/a" in last_cell:
            continue  # a hard constraint the request does not set
        lines.append(f"<tr><td>{_esc(name)}</td><td>{kind}</td>{first_cell}{last_cell}<td>{_esc(asks)}</td></tr>")
    lines.append("</table>")
    return "\n".join(lines)


def terms_table(first: Mapping[str, Any], last: Mapping[str, Any], steps: tuple[int, int]) -> str:
    lines = [
        '<table class="terms">',
        f"<tr><th>reward term</th><th>env step {steps[0]}</th><th>env step {steps[1]}</th></tr>",
    ]
    for kind, names in (("reward_component", COMPONENT_NAMES), ("reward_penalty", PENALTY_NAMES)):
        for name in names:
            key = f"{kind}/{name}"
            values = [sample["metrics"].get(key) for sample in (first, last)]
            if all(v is None for v in values):
                continue
            label = name if kind == "reward_component" else f"penalty: {name}"
            cells = "".join(f'<td class="num">{v:+.4f}</td>' if v is not None else "<td>n/a</td>" for v in values)
            lines.append(f"<tr><td>{_esc(label)}</td>{cells}</tr>")
    lines.append(f'<tr><th>reward</th><td class="num">{first["reward"]:.4f}</td><td class="num">{last["reward"]:.4f}</td></tr>')
    lines.append("</table>")
    return "\n".join(lines)


def request_section(row: Any) -> str:
    constraints = [
        ("from", row.org),
        ("to", row.dest),
        ("days", row.days),
        ("cities to visit", row.visiting_city_number),
        ("dates", ", ".join(row.dates)),
        ("people", row.people_number),
        ("budget", f"${row.budget:,.0f}"),
        ("level", row.level),
    ]
    constraints += [(f"local: {key}", value) for key, value in row.local_constraint.items() if value not in (None, "", "-")]
    scaffold = "".join(
        f"<tr><td>{day.day}</td><td>{_esc(day.kind)}</td><td>{_esc(day.current_city)}</td><td>{_esc(day.date)}</td></tr>"
        for day in row.scaffold
    )
    return "\n".join(
        [
            f'<p class="query">{_esc(row.query)}</p>',
            '<div class="plans"><div><h3>Constraints</h3><table class="constraints">',
            "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in constraints),
            "</table></div>",
            '<div><h3>Route scaffold</h3><table class="scaffold"><tr><th>day</th><th>kind</th><th>current city</th>'
            f"<th>date</th></tr>{scaffold}</table></div></div>",
        ]
    )


def curve_table(evaluations: Sequence[Evaluation]) -> str:
    def mean(samples: Sequence[Mapping[str, Any]], key: Optional[str]) -> float:
        values = [s["reward"] if key is None else s["metrics"].get(key, 0.0) for s in samples]
        return sum(values) / len(values) if values else 0.0

    head = "".join(f'<th>{e.env_step}{" (final)" if e.terminal else ""}</th>' for e in evaluations)
    rows = [("reward", None), ("required_grounded_recall", "required_grounded_recall"),
            ("reference_plan_success", "ultimate/reference_plan_success")]
    body = "".join(
        f"<tr><th>{_esc(name)}</th>" + "".join(f'<td class="num">{mean(e.samples, key):.4f}</td>' for e in evaluations) + "</tr>"
        for name, key in rows
    )
    return f'<table class="curve"><tr><th>env step</th>{head}</tr>{body}</table>'


def run_page(run: RunSummary, rows: Mapping[int, Any], evaluations: Sequence[Evaluation]) -> str:
    if not evaluations or not evaluations[0].samples:
        raise ReportError(f"{run.path}/{EVALUATIONS_FILE}: no anchor evaluation")
    first, last = evaluations[0], evaluations[-1]
    steps = (first.env_step, last.env_step)
    title = f"{run.group.label()}, seed {run.seed}"
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title><style>{STYLE}</style></head><body>',
        f"<h1>{_esc(title)}</h1>",
        f"<p>Run <code>{_esc(run.path.name)}</code>: {len(evaluations)} evaluations of the fixed anchor (greedy); "
        f"its plans at env step {steps[0]} and env step {steps[1]} side by side. Status: {_esc(run.status)}.</p>",
        '<p class="legend">' + "".join(f'<span class="{c}" title="{_esc(t)}">{c}</span>' for c, t in CELL_CLASSES.items()) + "</p>",
        "<h2>Fixed-anchor curve (mean over the anchor rows)</h2>",
        curve_table(evaluations),
    ]
    by_row = {sample["source_index"]: sample for sample in last.samples}
    for sample in first.samples:
        index = sample["source_index"]
        row = rows.get(index)
        if row is None:
            raise ReportError(f"{run.path}: anchor row {index} is not in the data given (--data names the run's train file)")
        final = by_row.get(index)
        if final is None:
            raise ReportError(f"{run.path}/{EVALUATIONS_FILE}: anchor row {index} is missing from env step {last.env_step}")
        parts += [
            f'<section class="row" id="row-{index}">',
            f"<h2>Row {index}: {_esc(row.org)} to {_esc(row.dest)}, {row.days} days, {_esc(row.level)}</h2>",
            request_section(row),
            '<div class="plans">',
            itinerary_table(row, sample, f"env step {steps[0]}"),
            itinerary_table(row, final, f"env step {steps[1]}"),
            "</div>",
            '<div class="plans"><div><h3>Checks</h3>',
            checks_table(sample, final, steps),
            "</div><div><h3>Reward terms</h3>",
            terms_table(sample, final, steps),
            "</div></div></section>",
        ]
    parts.append("</body></html>")
    return "\n".join(parts)


def page_name(run: RunSummary) -> str:
    return f"{run.path.name}.html"


def index_page(runs: Sequence[RunSummary], pages: Mapping[Path, str]) -> str:
    lines = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>Runs</title><style>{STYLE}</style></head><body>',
        "<h1>Runs and their plans</h1>",
        "<table><tr><th>run</th><th>group</th><th>seed</th><th>status</th><th>initial reward</th><th>final reward</th></tr>",
    ]
    for run in sorted(runs, key=lambda r: (r.group.label(), r.seed, r.path.name)):
        link = f'<a href="{_esc(pages[run.path])}">{_esc(run.path.name)}</a>' if run.path in pages else _esc(run.path.name)
        initial, final = (f"{run.initial['reward']:.4f}", f"{run.final['reward']:.4f}") if run.curve else ("n/a", "n/a")
        lines.append(
            f"<tr><td>{link}</td><td>{_esc(run.group.label())}</td><td>{run.seed}</td><td>{_esc(run.status)}</td>"
            f'<td class="num">{initial}</td><td class="num">{final}</td></tr>'
        )
    lines += ["</table>", "</body></html>"]
    return "\n".join(lines)


def write_pages(runs: Sequence[RunSummary], out: Path, data_path: Optional[str] = None) -> dict[str, Path]:
    """One page per complete run and an index.html linking them, into `out`; returns the files by name."""

    out.mkdir(parents=True, exist_ok=True)
    pages: dict[Path, str] = {}
    written: dict[str, Path] = {}
    for run in (r for r in runs if r.complete):
        page = run_page(run, load_rows(run.path, data_path), read_evaluations(run.path))
        name = page_name(run)
        if name in written:
            name = f"{run.path.parent.name}_{name}"
        written[name] = write_text_atomic(out / name, page)
        pages[run.path] = name
    written["index.html"] = write_text_atomic(out / "index.html", index_page(runs, pages))
    return written
