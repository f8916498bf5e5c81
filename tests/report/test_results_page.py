"""docs/results.md's tables are what `python -m travel.report` writes from the runs kept under docs/results/runs/,
so the page cannot drift from the committed metrics."""

from __future__ import annotations

from tests.conftest import REPO_ROOT
from travel.report.__main__ import BEGIN_MARKER, END_MARKER, build_report, report_section

DOCS = REPO_ROOT / "docs"


def test_the_results_page_holds_the_report_rebuilt_from_the_kept_runs(tmp_path):
    written = build_report([DOCS / "results" / "runs"], tmp_path)
    expected = report_section(written["report.md"].read_text(), DOCS / "results" / "curves.png", DOCS / "results.md")
    page = (DOCS / "results.md").read_text()
    shown = page[page.index(BEGIN_MARKER) : page.index(END_MARKER) + len(END_MARKER)]
    assert shown == expected, "rebuild it: python -m travel.report docs/results/runs --out docs/results --into docs/results.md"
    assert (DOCS / "results" / "curves.png").is_file()
