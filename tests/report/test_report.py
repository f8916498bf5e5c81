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


def test_each_run_records_its_command_card_and_minutes_and_the_report_shows_them(sweep, tmp_path):
    for run_dir in [*sweep.glob("*_seed*"), sweep / "tied"]:
        segments = json.loads((run_dir / "run.json").read_text())["segments"]
        assert len(segments) == 1, run_dir
        assert segments[0]["ended"] == ("failed" if run_dir.name == "tied" else "completed")
        assert segments[0]["devices"] == [] and segments[0]["wall_s"] > 0 and "launch.py" in segments[0]["command"]
    build_report([sweep], tmp_path)
    report = (tmp_path / "report.md").read_text()
    run_dir = next(sweep.glob("1_magrpo_seed1"))
    wall = json.loads((run_dir / "run.json").read_text())["segments"][0]["wall_s"]
    line = next(line for line in report.splitlines() if line.startswith("| 1_magrpo_seed1 |"))
    assert f"| cpu | {wall / 60:.1f} |" in line and "experiment=smoke" in line


def test_archived_runs_rebuild_the_same_tables_without_the_samples(sweep, tmp_path):
    from travel.report.archive import archive_run

    archived = tmp_path / "runs"
    runs = sorted(sweep.glob("*_magrpo_seed*"))
    targets = [archive_run(run_dir, archived, placeholders=True) for run_dir in runs]
    assert [t.name for t in targets] == ["smoke_seed1", "smoke_seed2"]  # the experiment= choice and the seed
    for run_dir, target in zip(runs, targets):
        final = json.loads((target / "eval_final.json").read_text())
        assert "samples" not in final and final["eval"] == json.loads((run_dir / "eval_final.json").read_text())["eval"]
        assert (target / "metrics.jsonl").read_text() == (run_dir / "metrics.jsonl").read_text()
    with pytest.raises(ReportError, match="already exists"):
        archive_run(runs[0], archived)
    with pytest.raises(ReportError, match="not a complete training run"):
        archive_run(sweep / "tied", archived)
    build_report(runs, tmp_path / "full")
    build_report([archived], tmp_path / "small")
    assert (tmp_path / "full" / "groups.csv").read_text() == (tmp_path / "small" / "groups.csv").read_text()


def test_the_archive_writes_the_readmes_placeholders_for_the_runs_own_paths(tmp_path):
    from travel.report.archive import PLACEHOLDERS, archive_run

    run = tmp_path / "run"
    run.mkdir()
    config = {"seed": 3, "algorithm": {"name": "magrpo"}, "actor": {"layout": "decentralized"},
              "data": {"path": "/home/me/tp/train.jsonl"}, "model": {"path": "/home/me/gguf"}}
    (run / "config.yaml").write_text(json.dumps(config))
    (run / "status").write_text("completed\n")
    (run / "metrics.jsonl").write_text(json.dumps({"env_step": 0, "eval/reward": 0.5}) + "\n")
    (run / "eval_final.json").write_text(json.dumps({"eval": {"eval/reward": 0.5}, "samples": [1], "held_out_samples": [2]}))
    command = "python launch.py data.path=/home/me/tp/train.jsonl model.path=/home/me/gguf seed=3"
    (run / "run.json").write_text(json.dumps({"segments": [{"command": command, "wall_s": 6.0}]}))
    target = archive_run(run, tmp_path / "archived", placeholders=True)
    assert target.name == "magrpo_seed3"  # no experiment= choice: named after the algorithm
    texts = "".join((target / name).read_text() for name in ("config.yaml", "run.json"))
    assert "/home/me" not in texts and all(p in texts for p in PLACEHOLDERS.values())
    assert json.loads((target / "eval_final.json").read_text()) == {"eval": {"eval/reward": 0.5}}


def test_the_archive_records_how_many_runs_shared_the_card_and_the_report_shows_it(tmp_path):
    from travel.report.archive import archive_run

    run = tmp_path / "run"
    run.mkdir()
    config = {"seed": 3, "algorithm": {"name": "magrpo"}, "actor": {"layout": "decentralized"}}
    (run / "config.yaml").write_text(json.dumps(config))
    (run / "status").write_text("completed\n")
    (run / "metrics.jsonl").write_text(json.dumps({"env_step": 0, "eval/reward": 0.5}) + "\n")
    (run / "eval_final.json").write_text(json.dumps({"eval": {"eval/reward": 0.5}}))
    (run / "run.json").write_text(json.dumps({"segments": [{"command": "python launch.py", "wall_s": 600.0}]}))
    with pytest.raises(ReportError, match="--runs-together=0"):
        archive_run(run, tmp_path / "refused", runs_together=0)
    target = archive_run(run, tmp_path / "archived", runs_together=4)
    assert [s["runs_together"] for s in json.loads((target / "run.json").read_text())["segments"]] == [4]
    build_report([target], tmp_path / "report")
    line = next(l for l in (tmp_path / "report" / "report.md").read_text().splitlines() if l.startswith("| magrpo_seed3 |"))
    assert "| 10.0 (4 at once) |" in line
    alone = archive_run(run, tmp_path / "alone")
    build_report([alone], tmp_path / "alone_report")
    line = next(l for l in (tmp_path / "alone_report" / "report.md").read_text().splitlines() if l.startswith("| magrpo_seed3 |"))
    assert "| 10.0 |" in line and "at once" not in line
