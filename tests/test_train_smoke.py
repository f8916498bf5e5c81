"""mode=train end to end: the smoke experiment through launch.py with offline W&B, the trainer's counts
against the dry run, a crash mid-run, and config errors that must fail before any weights load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from tests.conftest import compose_config
from tests.logging.wandb_files import history_rows, offline_run_file, run_identity
from travel.logging.eval_aggregation import EVAL_METRIC_NAMES
from travel.run import Run

REPO = Path(__file__).resolve().parents[1]
LAUNCH = REPO / "launch.py"
UPLOADED_KEYS = {"env_step", *EVAL_METRIC_NAMES, "turn_1/reward_mean", "turn_1/expected_return"}
MODEL_FACTORY_CALLS: list[dict] = []


def forbidden_model_factory(**kwargs):
    """Stands in for the model factory in tests where loading weights would be a bug."""
    MODEL_FACTORY_CALLS.append(kwargs)
    raise AssertionError("the model factory was called")



def metrics_records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_smoke_experiment_end_to_end_with_offline_wandb(smoke_run):
    run_dir, result = smoke_run
    for name in ("metrics.jsonl", "config.yaml", "eval_final.json", "eval_curve.png", "summary.md", "launch.log"):
        assert (run_dir / name).is_file(), name
    assert (run_dir / "status").read_text() == "completed\n"
    assert "collaboration_success" in (run_dir / "summary.md").read_text()
    assert "fixed-anchor evaluation: initial = env step 0" in (run_dir / "launch.log").read_text()
    assert (run_dir / "eval_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "initial" in result.stdout and "collaboration_success" in result.stdout

    rows = history_rows(offline_run_file(run_dir))
    uploaded = {key for row in rows for key in row if not key.startswith("_")}
    assert uploaded == UPLOADED_KEYS
    # the MAGRPO name pattern (README, "W&B run names"), with this run's model and 4 train rows
    name, group, tags = run_identity(offline_run_file(run_dir))
    assert (name, group) == ("Travel-magrpo-tiny-random-hard-budget-4train",) * 2
    assert {"travelplanner", "decentralized-actor", "magrpo"} <= set(tags)
    assert [row["_history_step"] for row in rows] == list(range(len(rows)))  # never an explicit step=
    # conf/experiment/smoke.yaml: 4 train rows per epoch, 2 epochs, K = 2, buffers of 3 prompts:
    # buffers end at env steps 6, 8 | 14, 16; logging_steps 4 -> turn_1 at 6 and 14 (8 and 16 are too
    # close); anchor evaluations at the epoch starts 0 and 8, the terminal one at 16.
    kinds = [("eval" if "eval/reward" in row else "turn", row["env_step"]) for row in rows]
    assert kinds == [("eval", 0), ("turn", 6), ("eval", 8), ("turn", 14), ("eval", 16)]
    for row in rows:
        keys = {key for key in row if not key.startswith("_")}
        assert keys in ({"env_step", *EVAL_METRIC_NAMES}, {"env_step", "turn_1/reward_mean", "turn_1/expected_return"})

    records = metrics_records(run_dir)
    assert [r["env_step"] for r in records if "train/reward" in r] == [6, 8, 14, 16]
    for record in (r for r in records if "train/reward" in r):  # per-stage timing stays in metrics.jsonl
        assert record["time/generation_s_per_env_step"] > 0 and record["time/reward_s_per_env_step"] > 0
        assert record["time/update_s_per_env_step"] >= 0
    final = json.loads((run_dir / "eval_final.json").read_text())
    assert final["env_step"] == 16 and final["num_rows"] == 2 and final["anchor_rows"] == 1
    assert final["eval"]["eval/reward"] == pytest.approx(rows[-1]["eval/reward"])
    assert set(final["eval_full"]) == {name.replace("eval/", "eval_full/") for name in EVAL_METRIC_NAMES}

    config = OmegaConf.load(run_dir / "config.yaml")
    assert config.model.name == "tiny_random" and config.algorithm.num_generations == 2
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from travel.agents.models import build_tiny_random

    # the main job makes real updates: the rewards differ within groups, the losses are not all zero, and
    # every agent's saved weights differ from the weights it started from
    train = [r for r in records if "train/reward" in r]
    assert any(r["train/reward_group_std"] > 0 and r["train/nonzero_advantage_rate"] > 0 for r in train)
    assert any(r[f"train/loss_agent_{agent}"] != 0 for r in train for agent in (0, 1))
    # an update with a loss has a gradient, and its norm is logged
    assert all(r[f"train/grad_norm_agent_{a}"] > 0 for r in train for a in (0, 1) if r[f"train/loss_agent_{a}"] != 0)
    initial = build_tiny_random(seed=config.seed).model.state_dict()
    for agent in (0, 1):
        directory = run_dir / "actors" / f"agent_{agent}"
        model = AutoModelForCausalLM.from_pretrained(directory)
        tokenizer = AutoTokenizer.from_pretrained(directory)
        assert model.config.hidden_size == 64 and tokenizer.chat_template
        changed = [name for name, tensor in model.state_dict().items() if not torch.equal(tensor, initial[name])]
        assert changed, f"agent {agent}'s weights are the initial ones"


def test_every_file_of_a_run_directory_has_one_mode(smoke_run):
    """What the run writes (config, status, metrics, checkpoints, actors, summary; W&B's own files aside) gets
    the mode the umask gives a new file, whether it was written atomically or not."""
    import os
    import stat

    from travel.io import FILE_MODE

    run_dir, _ = smoke_run
    files = [p for p in run_dir.rglob("*") if p.is_file() and not p.is_symlink() and "wandb" not in p.relative_to(run_dir).parts]
    modes = {p.relative_to(run_dir).as_posix(): oct(stat.S_IMODE(os.stat(p).st_mode)) for p in files}
    assert {"config.yaml", "status", "eval_final.json", "metrics.jsonl", "launch.log"} <= set(modes)
    assert any(name.endswith("model.safetensors") for name in modes) and any(name.endswith("digests.json") for name in modes)
    assert set(modes.values()) == {oct(FILE_MODE)}, {name: mode for name, mode in modes.items() if mode != oct(FILE_MODE)}


def test_trainer_counts_match_the_dry_run_report(smoke_run, tmp_path):
    from travel.logging.dry_report import build_dry_report

    run_dir, result = smoke_run
    report = build_dry_report(Run(compose_config("experiment=smoke", "mode=dry"), run_dir=str(tmp_path / "dry")))
    console = result.stdout
    records = metrics_records(run_dir)
    assert len([r for r in records if "train/reward" in r]) == report["optimizer_updates_per_agent"]
    assert [r["env_step"] for r in records if "eval/reward" in r] == report["eval_env_steps"]
    assert max(r["env_step"] for r in records) == report["env_steps"]
    assert f"final = env step {report['env_steps']}" in console
    # the report's own numbers, derived by hand: 4 rows x 2 epochs x K=2; 2 buffers (3 + 1) per epoch;
    # evaluations at both epoch starts (env steps 0 and 8) and at the end
    assert (report["env_steps"], report["optimizer_updates_per_agent"], report["eval_env_steps"]) == (16, 4, [0, 8, 16])


def test_a_run_that_crashes_mid_way_keeps_its_metrics_and_config(tmp_path, monkeypatch):
    from travel.algorithms.core import rollout

    real = rollout.score_joint_actions
    calls = []

    def failing_reward(row, pairs, config=None):
        calls.append(row.source_index)
        if len(calls) == 5:  # 1 anchor evaluation, 3 training rollouts (one buffer), then the 4th rollout
            raise RuntimeError("reward backend failed")
        return real(row, pairs, config)

    monkeypatch.setattr(rollout, "score_joint_actions", failing_reward)  # the rollout seam's default scoring
    with pytest.raises(RuntimeError, match="reward backend failed"):
        Run(compose_config("experiment=smoke"), run_dir=str(tmp_path))()
    records = metrics_records(tmp_path)
    assert [(r["env_step"], "eval/reward" in r, "train/reward" in r) for r in records] == [(0, True, False), (6, False, True)]
    config = OmegaConf.load(tmp_path / "config.yaml")
    assert config.algorithm.name == "magrpo" and config.seed == 42
    assert not (tmp_path / "eval_final.json").exists() and not (tmp_path / "actors").exists()
    assert (tmp_path / "status").read_text().startswith("failed\nRuntimeError: reward backend failed")
    assert "RuntimeError: reward backend failed" in (tmp_path / "launch.log").read_text()  # with its traceback


@pytest.mark.parametrize(
    "override, message",
    [
        ("algorithm.num_generations=1", "algorithm.num_generations=1"),
        ("curriculum.eval_per_cell=30", "curriculum.eval_per_cell=30"),
        ("hardware.agent_devices=[cuda:99,cpu]", "hardware.agent_devices"),
        ("hardware.agent_devices=[cpu,npu]", "hardware.agent_devices"),
        ("generation.rows_per_call=0", "generation.rows_per_call=0"),
        ("generation.eval_rows_per_call=0", "generation.eval_rows_per_call=0"),
    ],
)
def test_bad_config_fails_before_loading_weights(tmp_path, override, message):
    MODEL_FACTORY_CALLS.clear()
    cfg = compose_config("experiment=smoke", override, f"model._target_={__name__}.forbidden_model_factory")
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        Run(cfg, run_dir=str(tmp_path))()
    assert MODEL_FACTORY_CALLS == []
    assert not (tmp_path / "metrics.jsonl").exists()


def test_the_wider_final_evaluation_scores_every_row_not_trained_on(tmp_path):
    """experiment=smoke on the first 22 synthetic rows (20 of the 3-day easy cell, then 2 of the 5-day easy one)
    with curriculum.held_out_eval and only the easy level: 2 train rows and 1 eval row leave 17 unused rows of the
    curriculum's cell and the 2 rows of another cell, each scored at the end and reported apart from eval/*."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, str(LAUNCH), "experiment=smoke", "curriculum.held_out_eval=true", "data.num_rows=22",
         "curriculum.levels=[easy]", f"hydra.run.dir={tmp_path}"],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    final = json.loads((tmp_path / "eval_final.json").read_text())
    inside, outside = final["held_out"]["in_curriculum"], final["held_out"]["out_of_curriculum"]
    assert (final["num_rows"], inside["rows"], outside["rows"]) == (1, 18, 2)  # in: the eval row and 17 unused
    assert set(inside["cells"]) == {"3-day easy 1 city"} and set(outside["cells"]) == {"5-day easy 2 cities"}
    assert [s["group"] for s in final["held_out_samples"]] == ["in_curriculum"] * 17 + ["out_of_curriculum"] * 2
    assert all(not key.startswith(("in_curriculum", "out_of_curriculum")) for r in metrics_records(tmp_path) for key in r)
    summary = (tmp_path / "summary.md").read_text()
    assert "held-out rows at env step" in summary and "5-day easy 2 cities  out_of_curriculum     2" in summary
    assert f"{outside['metrics']['reference_commonsense_micro']:.4f}" in summary
    assert json.loads((tmp_path / "evaluations.json").read_text())["evaluations"][-1]["terminal"] is True
