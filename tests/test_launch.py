"""launch.py end to end: dry runs on synthetic and real rows, and sweeps through submitit (local and Slurm)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slurm_fixtures import slurm_cluster  # noqa: F401  (fixture)

pytestmark = pytest.mark.end_to_end  # sweeps through launchers: this file starts first

LAUNCH = Path(__file__).resolve().parents[1] / "launch.py"
PANELS = [[19, 74, 29, 90], [5, 68, 20, 80], [14, 63, 39, 94], [4, 71, 22, 88], [9, 70, 33, 92]]


def launch(cwd: Path, *overrides: str, timeout: int = 300) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, str(LAUNCH), *overrides], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result


def dry_reports(root: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(root.rglob("dry_run.json"))]


def test_dry_run_on_synthetic_rows(tmp_path):
    result = launch(tmp_path, "mode=dry", "data=synthetic", "seed=5")
    (report,) = dry_reports(tmp_path / "outputs" / "magrpo")
    assert next((tmp_path / "outputs" / "magrpo").iterdir()).name.startswith("5_")
    assert report["candidate_rows"] == 80 and report["train_rows"] == 60 and report["eval_rows"] == 20
    assert report["short_rows"] == 30
    assert report["env_steps"] == 5040 and report["optimizer_updates_per_agent"] == 126
    assert report["env_steps_by_phase"] == {"short": 960, "full": 4080}
    assert report["eval_panels"] == PANELS
    assert report["catalog_parse_failures"] == []
    assert len(report["train_source_indices"]) == 60
    assert set(report["catalog_counts"]) == set(report["required_slots"]) and len(report["catalog_counts"]) == 80
    assert 9000 <= report["reference_chars"]["min"] <= report["reference_chars"]["median"] <= report["reference_chars"]["max"]
    assert report["reward_range"] == [-0.25, 1.0] and report["all_dash_probe_reward"] == 0.08
    assert report["all_dash_probe"] == {
        "team_action_success": 1.0, "required_grounded_recall": 0.0, "required_cooperative_contribution": 0.0,
    }
    for role in ("logistics", "experience"):
        lengths = report["prompt_chars"][role]
        assert len(lengths["per_row"]) == 80 and 0 < lengths["min"] <= lengths["median"] <= lengths["max"]
    assert sum(report["budget_contract"].values()) == 80
    assert "eval panels" in result.stdout and "5040 env steps" in result.stdout


def test_a_dry_run_checks_the_options_without_loading_the_model_code(tmp_path):
    """mode=dry reads the decoder's option vocabularies from travel/generation/options.py and never imports the
    decoder or transformers, so it (and a sweep's parent process) starts in seconds."""
    code = (
        "import runpy, sys; sys.argv = [sys.argv[0], 'mode=dry', 'data=synthetic']; "
        f"runpy.run_path({str(LAUNCH)!r}, run_name='__main__'); "
        "print('loaded:', sorted(name for name in ('transformers', 'travel.generation.decoder') if name in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert dry_reports(tmp_path / "outputs")  # the dry run ran to its report
    assert "loaded: []" in result.stdout, result.stdout[-2000:]


def test_dry_run_on_the_real_train_rows(tmp_path, shared_data_dir):
    launch(
        tmp_path, "mode=dry", "data=local", f"data.path={shared_data_dir / 'train.jsonl'}",
        "curriculum.train_per_cell=4", "curriculum.eval_per_cell=1",
    )
    (report,) = dry_reports(tmp_path / "outputs")
    assert report["source_rows"] == 45 and report["candidate_rows"] == 20
    assert (report["train_rows"], report["eval_rows"], report["short_rows"]) == (16, 4, 8)
    assert report["catalog_parse_failures"] == []
    # 8 epochs x 8 short rows x 4 + 17 x 16 x 4; updates 8 x 1 + 17 x 2
    assert report["env_steps"] == 8 * 8 * 4 + 17 * 16 * 4 and report["optimizer_updates_per_agent"] == 8 + 34
    for index, slots in report["required_slots"].items():
        assert [1, "current_city"] in slots


def test_eval_count_above_the_pool_fails_naming_the_option(tmp_path):
    result = subprocess.run(
        [sys.executable, str(LAUNCH), "mode=dry", "data=synthetic", "curriculum.eval_per_cell=30"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode != 0
    assert "curriculum.eval_per_cell=30" in result.stderr and "has only 20" in result.stderr


def check_sweep(tmp_path: Path) -> None:
    sweeps = list((tmp_path / "multirun_outputs").iterdir())
    assert len(sweeps) == 1
    jobs = sorted(p for p in sweeps[0].iterdir() if (p / "config.yaml").is_file())
    assert [p.name for p in jobs] == ["0_magrpo_seed1", "1_magrpo_seed2"]  # the seed and algorithm in the name
    seeds = []
    for job in jobs:
        report = json.loads((job / "dry_run.json").read_text())
        assert report["env_steps"] == 5040 and report["eval_panels"] == PANELS
        seeds.append(int(next(l for l in (job / "config.yaml").read_text().splitlines() if l.startswith("seed:")).split()[1]))
        # each job records its own single-run command, not the sweep's nor the launcher worker's command line
        (segment,) = json.loads((job / "run.json").read_text())["segments"]
        assert segment["command"] == f"python launch.py mode=dry data=synthetic seed={seeds[-1]}"
    assert seeds == [1, 2]


def test_sweep_with_submitit_local(tmp_path):
    launch(tmp_path, "--multirun", "mode=dry", "data=synthetic", "seed=1,2", "hydra/launcher=submitit_local")
    check_sweep(tmp_path)
    assert not list((tmp_path / "multirun_outputs").rglob("%j")), "a literal %j directory was left"


def test_sweep_through_the_local_slurm_cluster(tmp_path, slurm_cluster):
    launch(tmp_path, "--multirun", "mode=dry", "data=synthetic", "seed=1,2", "hydra/launcher=submitit_slurm", timeout=600)
    check_sweep(tmp_path)
    logs = list((tmp_path / "multirun_outputs").rglob("*_log.out"))
    assert logs, "submitit wrote no Slurm job logs"
