"""Runs that survive: a run stopped by SIGTERM writes a checkpoint and, resumed, writes exactly the records and
weights of an uninterrupted run; a checkpoint write killed with SIGKILL leaves the previous checkpoint usable;
mode=eval reproduces a finished run's final evaluation; a used run directory is refused without resume."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.conftest import REPO_ROOT, compose_config
from tests.kill import kill_at_random_point, terminate_when
from tests.logging.wandb_files import read_records
from travel.agents.layouts import build_layout
from travel.agents.models import build_tiny_random
from travel.checkpoint.run_dir import RunDirectoryInUse
from travel.checkpoint.store import CheckpointError, CheckpointStore, complete_checkpoints, load_checkpoint
from travel.run import Run

LAUNCH = [sys.executable, str(REPO_ROOT / "launch.py"), "experiment=smoke", "logger=wandb", "logger.mode=offline"]
QUIET = {**os.environ, "WANDB_SILENT": "true"}


def records(run_dir: Path) -> list[dict]:
    """metrics.jsonl without timing and memory keys (and without records that held only those)."""
    out = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = {k: v for k, v in json.loads(line).items() if not k.startswith(("time/", "memory/"))}
        if set(record) != {"env_step"}:
            out.append(record)
    return out


def weights(run_dir: Path, policy: str) -> dict[str, torch.Tensor]:
    return load_file(str(run_dir / "actors" / policy / "model.safetensors"))


def test_a_run_stopped_by_sigterm_resumes_to_the_uninterrupted_records_and_weights(smoke_run, tmp_path):
    reference, _ = smoke_run
    run_dir = tmp_path / "run"
    child = subprocess.Popen(
        [*LAUNCH, f"hydra.run.dir={run_dir}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=QUIET
    )
    first = run_dir / "checkpoints" / "env_step_0" / "checkpoint.json"  # the first evaluation point
    terminate_when(child, first.exists, "its first checkpoint", timeout_s=300)
    status = (run_dir / "status").read_text()
    assert status.startswith("stopped\nRunInterrupted: SIGTERM at env step "), status
    stopped = [path.name for path in complete_checkpoints(run_dir)]
    assert stopped == ["env_step_0", "env_step_6"]  # the evaluation point, then SIGTERM's at the next buffer end

    resumed = subprocess.run(
        [*LAUNCH, f"hydra.run.dir={run_dir}", "resume=auto"], capture_output=True, text=True, timeout=600, env=QUIET
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {run_dir / 'checkpoints' / stopped[-1]}" in resumed.stdout
    assert records(run_dir) == records(reference)  # no record lost or written twice
    for policy in ("agent_0", "agent_1"):
        ours, theirs = weights(run_dir, policy), weights(reference, policy)
        assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours), policy
    assert (run_dir / "status").read_text() == "completed\n"
    assert [p.name for p in complete_checkpoints(run_dir)] == ["env_step_6", "env_step_8"]  # checkpoint.keep=2
    # W&B continues the same run: both offline runs carry one run id
    files = sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
    ids = {r.run.run_id for path in files for r in read_records(path) if r.WhichOneof("record_type") == "run"}
    assert len(files) == 2 and len(ids) == 1, (files, ids)


def test_mode_eval_reproduces_the_final_evaluation_of_a_finished_run(smoke_run, tmp_path):
    reference, _ = smoke_run
    result = Run(compose_config("mode=eval", f"checkpoint={reference}"), run_dir=str(tmp_path / "eval"))()
    ours = json.loads((tmp_path / "eval" / "eval_final.json").read_text())
    assert ours == json.loads((reference / "eval_final.json").read_text())
    assert result["env_step"] == ours["env_step"] == 16
    assert "saved actors at env step 16" in (tmp_path / "eval" / "summary.md").read_text()
    with pytest.raises(ValueError, match="mode=eval needs checkpoint=<dir>"):
        Run(compose_config("mode=eval"), run_dir=str(tmp_path / "none"))()


def test_running_twice_into_one_directory_without_resume_names_resume_auto(tmp_path):
    Run(compose_config("mode=dry", "data=synthetic"), run_dir=str(tmp_path))()
    before = (tmp_path / "dry_run.json").read_bytes()
    with pytest.raises(RunDirectoryInUse, match="resume=auto"):
        Run(compose_config("mode=dry", "data=synthetic"), run_dir=str(tmp_path))()
    assert (tmp_path / "dry_run.json").read_bytes() == before  # nothing overwritten


def test_a_checkpoint_of_another_algorithm_is_refused_naming_both(smoke_run, tmp_path):
    reference, _ = smoke_run
    (checkpoint, *_) = complete_checkpoints(reference)
    with pytest.raises(CheckpointError, match="a checkpoint of algorithm 'magrpo', but this run's is 'madpo'"):
        Run(compose_config("experiment=smoke", "algorithm=madpo", f"resume={checkpoint}"), run_dir=str(tmp_path))()
    assert not (tmp_path / "metrics.jsonl").exists()  # refused before anything trained


def _layout(seed: int):
    hardware = {"agent_devices": ["cpu", "cpu"], "parallel_training": "none"}
    generation = {"max_new_tokens": 320, "max_value_tokens": 4, "temperature": 0.7, "top_p": 0.8}
    return build_layout(lambda **kw: build_tiny_random(seed=seed), hardware, generation, learning_rate=1e-3, seed=seed)


def _checkpoint_forever(run_dir: Path, saved) -> None:
    from transformers.utils import logging

    logging.disable_progress_bar()
    layout, store = _layout(2), CheckpointStore(run_dir, keep=2)
    step = 100
    while True:
        step += 1
        store.save(step, layout, {"trainer": "test", "step": step})
        with saved.get_lock():
            saved.value += 1


def test_sigkill_during_a_checkpoint_write_leaves_the_previous_checkpoint_usable(tmp_path):
    first = _layout(1)
    CheckpointStore(tmp_path, keep=2).save(1, first, {"trainer": "test", "step": 1})
    started = time.perf_counter()
    CheckpointStore(tmp_path / "timing", keep=2).save(1, first, {"trainer": "test", "step": 1})
    one_save = time.perf_counter() - started
    rng, mid_write = random.Random(0), []
    for trial in range(8):
        kill_at_random_point(_checkpoint_forever, (tmp_path,), rng, most_done=2, pause_s=1.5 * one_save)
        mid_write.append(any(p.name.startswith(".") for p in (tmp_path / "checkpoints").iterdir()))
        found = complete_checkpoints(tmp_path)
        assert found, "no complete checkpoint left"
        newest = load_checkpoint(found[-1])
        fresh = _layout(3)
        newest.restore(fresh)  # weights, optimizer states and RNGs load
        expected = first if newest.env_step == 1 else _layout(2)
        for a, b in zip(fresh.actors, expected.actors):
            assert all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()))
        assert newest.trainer["step"] == newest.env_step
    assert any(mid_write), "no kill landed inside a checkpoint write"
