"""The run directory's own records (travel/checkpoint/run_dir.py): run.json's segments and launch.log's text."""

from __future__ import annotations

import json
import sys

import pytest
from tqdm import tqdm

from travel.checkpoint.run_dir import recorded, read_status


def test_each_start_of_a_run_adds_a_segment_with_its_end_and_wall_seconds(tmp_path):
    with recorded(tmp_path):
        print("first start")
    with pytest.raises(RuntimeError):
        with recorded(tmp_path):
            raise RuntimeError("backend failed")
    segments = json.loads((tmp_path / "run.json").read_text())["segments"]
    assert [s["ended"] for s in segments] == ["completed", "failed"]
    assert all(s["wall_s"] >= 0 and s["devices"] == [] and s["command"].startswith("python ") for s in segments)
    assert read_status(tmp_path) == "failed"


def test_progress_bars_leave_no_blank_lines_in_the_log(tmp_path):
    with recorded(tmp_path):
        print("before")
        for _ in tqdm(range(3), file=sys.stderr, leave=False, mininterval=0):
            pass
        for _ in tqdm(range(3), file=sys.stderr, mininterval=0):
            pass
        print("")
        print("after")
    lines = (tmp_path / "launch.log").read_text().splitlines()
    assert lines[0] == "before" and lines[-1] == "after"
    assert lines.count("") <= 1  # at most the deliberate blank line
