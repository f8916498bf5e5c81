from __future__ import annotations

import re

import pytest

from bench import plot_decode_steps


def test_the_recorded_history_plots_to_a_png(tmp_path):
    rows = plot_decode_steps.read_rows(plot_decode_steps.RESULTS)
    assert [row["commit"] for row in rows][-1] == "1ecca9e"
    assert all(re.fullmatch(r"[0-9a-f]{7}", row["commit"]) for row in rows)
    out = tmp_path / "steps.png"
    assert plot_decode_steps.main(["--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_value_that_is_not_a_time_names_its_line_and_column(tmp_path):
    results = tmp_path / "steps.csv"
    results.write_text("commit,change,ms_per_step_20,ms_per_step_1\nabc1234,x,5.1,4.0\ndef5678,y,-3,4.0\n")
    with pytest.raises(ValueError, match=re.escape(f"{results}:3: ms_per_step_20='-3' is not a time in ms")):
        plot_decode_steps.read_rows(results)
