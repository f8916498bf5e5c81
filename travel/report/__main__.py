"""`python -m travel.report RUN_OR_SWEEP_DIR... [--out DIR]`: results across runs and seeds.

Reads every training run at or under the given directories (travel/report/runs.py), groups the complete ones
by algorithm x comparator x actor layout from their resolved configs, and writes into --out (default
`report/`): `report.md` (mean ± std over seeds of the headline metrics, each run's reward, the incomplete runs
apart), `groups.csv` and `runs.csv` (every main metric: initial, final, delta) and `curves.png` (each group's
fixed-anchor curves with a band over seeds). The Markdown is printed too. With `--html`, `html/` in --out gets
one page per complete run showing its plans, and an index linking them (travel/report/html.py). With
`--into FILE`, the tables and the figure also replace what stands between FILE's two report markers (how
docs/results.md is rebuilt from docs/results/runs/).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from travel.io import write_text_atomic
from travel.report.figure import plot_groups
from travel.report.html import write_pages
from travel.report.runs import ReportError, read_runs
from travel.report.tables import group_rows, groups_csv, markdown, runs_csv


def build_report(
    paths: Sequence[str | Path], out: str | Path, *, pages: bool = False, data: Optional[str] = None
) -> dict[str, Path]:
    """Write the report of the runs under `paths` into `out`; returns the files written by name."""

    runs = read_runs(paths)
    if not any(run.complete for run in runs):
        listed = ", ".join(f"{r.path} ({r.status})" for r in runs) or "none"
        raise ReportError(f"no complete training run under {', '.join(map(str, paths))} (runs found: {listed})")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = group_rows(runs)
    written = {
        "report.md": write_text_atomic(out / "report.md", markdown(runs, rows)),
        "groups.csv": write_text_atomic(out / "groups.csv", groups_csv(rows)),
        "runs.csv": write_text_atomic(out / "runs.csv", runs_csv(runs)),
    }
    written["curves.png"] = plot_groups(runs, out / "curves.png")
    if pages:
        written.update({f"html/{name}": path for name, path in write_pages(runs, out / "html", data).items()})
    return written


BEGIN_MARKER = "<!-- begin: written by python -m travel.report --into -->"
END_MARKER = "<!-- end: written by python -m travel.report --into -->"


def report_section(report: str, figure: Path, document: Path) -> str:
    """What goes between the markers: the figure (linked relative to the document), then the tables."""
    link = Path(os.path.relpath(figure, document.parent)).as_posix()
    return f"{BEGIN_MARKER}\n\n![fixed-anchor curves, mean ± std over seeds]({link})\n\n{report}\n{END_MARKER}"


def write_into(document: str | Path, section: str) -> Path:
    """Replace the text between the document's report markers (markers included) with `section`."""
    document = Path(document)
    text = document.read_text(encoding="utf-8") if document.is_file() else ""
    begin, end = text.find(BEGIN_MARKER), text.find(END_MARKER)
    if begin < 0 or end < begin:
        raise ReportError(f"{document}: no report markers (a line {BEGIN_MARKER!r}, later a line {END_MARKER!r})")
    return write_text_atomic(document, text[:begin] + section + text[end + len(END_MARKER):])


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m travel.report", description=__doc__.split("\n\n")[1])
    parser.add_argument("paths", nargs="+", help="run directories, sweep directories, or folders holding them")
    parser.add_argument("--out", default="report", help="where the tables and the figure go (default: report/)")
    parser.add_argument("--html", action="store_true", help="also write a page per run showing its plans (html/)")
    parser.add_argument("--data", help="the runs' train file, where their config's data.path is not on this machine")
    parser.add_argument("--into", help="a Markdown file whose report markers get the tables and the figure")
    args = parser.parse_args(argv)
    try:
        written = build_report(args.paths, args.out, pages=args.html, data=args.data)
        if args.into:
            report = written["report.md"].read_text(encoding="utf-8")
            written["into"] = write_into(args.into, report_section(report, written["curves.png"], Path(args.into)))
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(written["report.md"].read_text(encoding="utf-8"))
    print("wrote " + ", ".join(str(path) for path in written.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
