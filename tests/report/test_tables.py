"""The report's verdict on whether a group learns, and `--into`'s rewrite of a document between its markers."""

from __future__ import annotations

from pathlib import Path

import pytest

from travel.report.__main__ import BEGIN_MARKER, END_MARKER, report_section, write_into
from travel.report.runs import Group, ReportError, RunSummary
from travel.report.tables import learns, run_learns

GROUP = Group("magrpo", "-", "decentralized")


def run_with(seed: int, rewards: list[float]) -> RunSummary:
    curve = [(64 * i, {"reward": r}) for i, r in enumerate(rewards)]
    return RunSummary(path=Path(f"run{seed}"), group=GROUP, seed=seed, status="completed", curve=curve)


@pytest.mark.parametrize(
    ("rewards", "verdict"),
    [
        ([0.40, 0.45, 0.50], True),
        ([0.40, 0.45, 0.41], True),  # final above initial, last two (0.43) above the first
        ([0.40, 0.50, 0.40], False),  # final back at the initial point
        ([0.40, 0.20, 0.45], False),  # final above, but the last two average 0.325
    ],
)
def test_a_run_learns_when_its_final_point_and_last_two_points_stand_above_the_first(rewards, verdict):
    assert run_learns(run_with(1, rewards)) is verdict


def test_a_group_learns_only_at_every_seed_and_needs_two():
    rising, flat = [0.4, 0.5, 0.6], [0.4, 0.4, 0.4]
    assert learns([run_with(1, rising), run_with(2, rising)]) == "yes"
    assert learns([run_with(1, rising), run_with(2, flat)]) == "no (seed 2)"
    assert learns([run_with(1, rising)]) == "n/a (one seed)"


def test_into_replaces_only_the_text_between_the_markers(tmp_path):
    document = tmp_path / "docs" / "results.md"
    document.parent.mkdir()
    document.write_text(f"# Results\n\nbefore\n\n{BEGIN_MARKER}\nold table\n{END_MARKER}\n\nafter\n")
    section = report_section("| new | table |\n", tmp_path / "docs" / "results" / "curves.png", document)
    write_into(document, section)
    text = document.read_text()
    assert text.startswith("# Results\n\nbefore\n\n") and text.endswith("\n\nafter\n")
    assert "old table" not in text and "| new | table |" in text and "](results/curves.png)" in text
    write_into(document, section)  # again: the same document
    assert document.read_text() == text
    (tmp_path / "bare.md").write_text("# no markers\n")
    with pytest.raises(ReportError, match="no report markers"):
        write_into(tmp_path / "bare.md", section)
