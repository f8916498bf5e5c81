"""A Slurm job warned by SIGUSR2 checkpoints, is requeued and resumes: the smoke experiment as a one-job sweep
through the local Slurm cluster gets the signal Slurm sends `signal_delay_s` before a job's time limit (or at a
preemption), writes a checkpoint at its next checkpoint point, is requeued by submitit (max_num_timeout),
resumes from that checkpoint (Slurm sets SLURM_RESTART_COUNT) and completes with the records and final weights
of the unlimited run (`smoke_run`).

The test sends the signal itself (`scancel --signal=USR2`), once the run has written its first record and its
first checkpoint. Slurm checks time limits on a 30-second cycle, so its own warning before a one-minute limit
comes anywhere in a 30-second span, as long as the whole smoke run takes: on a busy machine before the run has
started (submitit then requeues at once), on a quiet one after it has finished, and then nothing is tested. The
three-minute limit keeps Slurm's own warning out of the way; the time-limit arithmetic of the window
(`RequeueWindow`) is tested in tests/checkpoint/test_signals.py."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.checkpoint.test_resume import QUIET, records, weights
from tests.conftest import REPO_ROOT
from tests.slurm_fixtures import slurm_cluster  # noqa: F401  (fixture)


def release_requeued_jobs() -> None:
    """Slurm holds a requeued job back for about two minutes (BeginTime); the test lets it start at once."""
    listing = subprocess.run(["squeue", "-h", "-t", "PENDING", "-o", "%i %r"], capture_output=True, text=True).stdout
    for line in listing.splitlines():
        job, _, reason = line.partition(" ")
        if reason.strip() == "BeginTime":
            subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], capture_output=True)


def warn_once_training(sweep) -> bool:
    """SIGUSR2 to the sweep's job once its run has written its first record (the evaluation at env step 0, whose
    checkpoint is written with it); whether it was sent."""
    metrics = sweep / "0_magrpo_seed42" / "metrics.jsonl"
    jobs = [path.name for path in (sweep / ".submitit").glob("*") if path.name.isdigit()]
    if not (metrics.is_file() and metrics.read_text().strip() and len(jobs) == 1):
        return False
    return subprocess.run(["scancel", "--signal=USR2", jobs[0]], capture_output=True).returncode == 0


def test_a_warned_job_checkpoints_is_requeued_resumes_and_matches_the_unlimited_run(smoke_run, slurm_cluster, tmp_path):
    reference, _ = smoke_run
    sweep = tmp_path / "sweep"
    child = subprocess.Popen(
        [
            sys.executable, str(REPO_ROOT / "launch.py"), "--multirun", "experiment=smoke", "logger=wandb",
            "logger.mode=offline", "hydra/launcher=submitit_slurm", f"hydra.sweep.dir={sweep}",
            "hydra.launcher.timeout_min=3", "hydra.launcher.signal_delay_s=30", "hydra.launcher.max_num_timeout=15",
            "hardware.slurm.cpus_per_task=1",  # the other CPU stays free for the other Slurm tests
        ],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=QUIET,
    )
    deadline, warned = time.monotonic() + 900, False
    while child.poll() is None:
        assert time.monotonic() < deadline, "the sweep did not finish in 15 minutes"
        release_requeued_jobs()
        warned = warned or warn_once_training(sweep)
        time.sleep(1)
    stdout, stderr = child.communicate()
    result = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert warned, "the run finished before it wrote a record the test could see"
    run_dir = sweep / "0_magrpo_seed42"
    log = (run_dir / "launch.log").read_text()
    assert "RunInterrupted: SIGUSR2 at env step" in log or "no checkpoint point within" in log, log[-3000:]
    assert "resuming from" in log, log[-3000:]
    assert (run_dir / "status").read_text() == "completed\n"
    assert records(run_dir) == records(reference)
    for policy in ("agent_0", "agent_1"):
        ours, theirs = weights(run_dir, policy), weights(reference, policy)
        assert ours.keys() == theirs.keys() and all((ours[k] == theirs[k]).all() for k in ours), policy
