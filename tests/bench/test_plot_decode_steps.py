from __future__ import annotations

import re

import pytest

from bench import plot_decode_steps


def test_the_recorded_history_plots_to_a_png(tmp_path):
    rows = plot_decode_steps.read_rows(plot_decode_steps.RESULTS)
    assert len(rows) >= 13 and all(re.fullmatch(r"[0-9a-f]{7}", row["commit"]) for row in rows)
    # copied from docs/performance.md: each commit and its times are there
    performance = (plot_decode_steps.REPO_ROOT / "docs" / "performance.md").read_text()
    for row in rows:
        assert row["commit"] in performance, row
        assert all(value in performance for value in (row["ms_per_step_20"], row["ms_per_step_1"]) if value), row
    out = tmp_path / "steps.png"
    assert plot_decode_steps.main(["--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_value_that_is_not_a_time_names_its_line_and_column(tmp_path):
    results = tmp_path / "steps.csv"
    results.write_text("commit,change,ms_per_step_20,ms_per_step_1\nabc1234,x,5.1,4.0\ndef5678,y,-3,4.0\n")
    with pytest.raises(ValueError, match=re.escape(f"{results}:3: ms_per_step_20='-3' is not a time in ms")):
        plot_decode_steps.read_rows(results)
