"""`python -m travel.report` on a real sweep: `experiment=smoke` over two seeds and two algorithms (reduced to
one train row and one epoch), plus a run that fails. The group table's means and standard deviations
are those computed here from each run's own files (the first eval/* record of metrics.jsonl, and
eval_final.json), the groups come from the configs (the subdirectory names carry algorithm and seed too), and
the failed run is listed apart, in no mean."""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT
from tests.preference_runs import ENV
from travel.report.__main__ import build_report, main
from travel.report.runs import ReportError, read_runs

pytestmark = pytest.mark.end_to_end  # whole training runs: this file starts first

# one train row (one curriculum cell), one epoch (so no short-route epoch before it), no saved actors: the report
# reads metrics and evaluations only
REDUCED = [
    "curriculum.train_per_cell=1", "curriculum.levels=[easy]", "curriculum.short_epochs=0", "algorithm.num_train_epochs=1",
    "output.save_final_model=false",
]
SEEDS = (1, 2)


def launch(*overrides: str, multirun: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "launch.py"), *(["--multirun"] if multirun else []), "experiment=smoke", *REDUCED, *overrides],
        capture_output=True, text=True, timeout=900, env=ENV,
    )


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("report") / "sweep"
    done = launch("seed=1,2", "algorithm=madpo,magrpo", f"hydra.sweep.dir={root}", multirun=True)
    assert done.returncode == 0, done.stderr[-5000:]
    # every comparison ties with 4-token values: the run fails with NoPreferencePairs
    tied = launch("algorithm=madpo", "generation.max_value_tokens=4", "generation.max_new_tokens=256", f"hydra.run.dir={root / 'tied'}")
    assert tied.returncode != 0
    return root


def by_hand(run_dir, metric: str) -> tuple[float, float]:
    first = next(json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if "eval/reward" in line)
    final = json.loads((run_dir / "eval_final.json").read_text())["eval"]
    return first[f"eval/{metric}"], final[f"eval/{metric}"]


def test_the_report_averages_each_group_over_its_seeds_and_lists_the_failed_run_apart(sweep, tmp_path):
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == [
        "0_madpo_seed1", "1_magrpo_seed1", "2_madpo_seed2", "3_magrpo_seed2", "tied",
    ]
    assert main([str(sweep), "--out", str(tmp_path)]) == 0
    groups = list(csv.DictReader((tmp_path / "groups.csv").open()))
    assert {(row["algorithm"], row["comparator"], row["layout"], row["seeds"]) for row in groups} == {
        ("madpo", "-", "decentralized", "2"), ("magrpo", "-", "decentralized", "2"),
    }
    checked = 0
    for row in groups:
        runs = [next(sweep.glob(f"*_{row['algorithm']}_seed{seed}")) for seed in SEEDS]
        pairs = [by_hand(run, row["metric"]) for run in runs]
        for column, values in (
            ("initial", [a for a, _ in pairs]), ("final", [b for _, b in pairs]), ("delta", [b - a for a, b in pairs]),
        ):
            assert float(row[f"{column}_mean"]) == pytest.approx(statistics.fmean(values), abs=1e-12), (row, column)
            assert float(row[f"{column}_std"]) == pytest.approx(statistics.stdev(values), abs=1e-12), (row, column)
        checked += 1
    assert checked >= 2 * 14  # both groups, every main metric
    report = (tmp_path / "report.md").read_text()
    incomplete = report.split("## Incomplete runs (in no mean)")[1]
    assert "tied" in incomplete and "| failed | NoPreferencePairs: no non-tied preference pairs" in incomplete
    assert "tied" not in report.split("## Incomplete runs")[0]
    assert (tmp_path / "curves.png").stat().st_size > 10_000


def test_a_report_without_a_complete_run_names_what_it_found(sweep, tmp_path):
    with pytest.raises(ReportError, match=r"no complete training run .*tied \(failed\)"):
        build_report([sweep / "tied"], tmp_path)
    assert [run.status for run in read_runs([sweep / "tied"])] == ["failed"]
    assert main([str(tmp_path / "nowhere")]) == 2  # not a directory: an error naming it, no traceback
