"""The training diagnostics table: early and late means of each run's train/* series, one table per set logged."""

from __future__ import annotations

import json

import pytest

from travel.report.diagnostics import diagnostics_markdown, early_late
from travel.report.runs import Group, read_run


def test_early_and_late_are_the_means_of_the_first_and_last_quarter():
    assert early_late([1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0, 15.0]) == (2.0, 14.0)  # quarters of two records
    assert early_late([4.0, 6.0, 8.0]) == (4.0, 8.0)  # under four records: one each
    with pytest.raises(ValueError):
        early_late([])


def write_run(path, seed, algorithm, records):
    path.mkdir(parents=True)
    config = {"seed": seed, "algorithm": {"name": algorithm}, "actor": {"layout": "decentralized"}}
    (path / "config.yaml").write_text(json.dumps(config))
    (path / "status").write_text("completed\n")
    lines = [{"env_step": 0, "eval/reward": 0.4}, *records, {"env_step": 99, "eval/reward": 0.5}]
    (path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (path / "eval_final.json").write_text(json.dumps({"eval": {"eval/reward": 0.5}}))
    return read_run(path, iterative=set())


def test_each_run_shows_early_to_late_of_what_it_logged_in_a_table_of_its_own_kind(tmp_path):
    online = [{"env_step": 8 * i, "train/reward": r, "train/reward_group_std": s}
              for i, (r, s) in enumerate([(0.2, 0.1), (0.3, 0.1), (0.4, 0.05), (0.5, 0.01)])]
    dpo = [{"env_step": 4 * i, "train/dpo_loss": 0.69 - 0.01 * i, "train/grad_norm_agent_0": 2.0} for i in range(4)]
    runs = [
        write_run(tmp_path / "magrpo_seed1", 1, "magrpo", online),
        write_run(tmp_path / "madpo_seed1", 1, "madpo", dpo),
        write_run(tmp_path / "madpo_seed2", 2, "madpo", [{"env_step": 4, "train/dpo_loss": 0.5, "train/flag": True}]),
    ]
    assert runs[0].series == {"reward": [0.2, 0.3, 0.4, 0.5], "reward_group_std": [0.1, 0.1, 0.05, 0.01]}
    assert "flag" not in runs[2].series  # booleans are no series
    lines = diagnostics_markdown(runs)
    headers = [line for line in lines if line.startswith("| run |")]
    assert headers == [
        "| run | group | seed | dpo_loss | grad_norm_agent_0 |",
        "| run | group | seed | dpo_loss |",
        "| run | group | seed | reward | reward_group_std |",
    ]
    assert "| magrpo_seed1 | magrpo | 1 | 0.2 → 0.5 | 0.1 → 0.01 |" in lines
    assert "| madpo_seed1 | madpo | 1 | 0.69 → 0.66 | 2 → 2 |" in lines
    assert "| madpo_seed2 | madpo | 2 | 0.5 |" in lines  # one record: its value alone


def test_a_run_that_logged_no_diagnostic_says_so(tmp_path):
    run = write_run(tmp_path / "run", 1, "magrpo", [])
    assert diagnostics_markdown([run])[-1] == "none logged"
    assert Group("magrpo", "-", "decentralized") == run.group
