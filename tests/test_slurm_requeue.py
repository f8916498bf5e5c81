"""A Slurm job that reaches its time limit requeues itself and resumes: the smoke experiment as a one-job sweep
through the local Slurm cluster with a one-minute limit gets SIGUSR2 `signal_delay_s` before the limit (or up to
30 s earlier: Slurm checks limits on a 30-second cycle), writes a checkpoint, is requeued by submitit
(max_num_timeout), resumes from that checkpoint (Slurm sets SLURM_RESTART_COUNT) and completes with the records
and final weights of the unlimited run (`smoke_run`). The run stops for its checkpoint once less than
`signal_delay_s` remain, so a 30 s delay leaves each attempt about half the minute to train: shorter than the
smoke run, which therefore always needs a requeue. A busy machine may need several attempts: the smoke run's
checkpoint points are up to six env steps apart, so max_num_timeout leaves room for one point per attempt."""

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


def test_a_job_past_its_time_limit_is_requeued_resumes_and_matches_the_unlimited_run(smoke_run, slurm_cluster, tmp_path):
    reference, _ = smoke_run
    sweep = tmp_path / "sweep"
    child = subprocess.Popen(
        [
            sys.executable, str(REPO_ROOT / "launch.py"), "--multirun", "experiment=smoke", "logger=wandb",
            "logger.mode=offline", "hydra/launcher=submitit_slurm", f"hydra.sweep.dir={sweep}",
            "hydra.launcher.timeout_min=1", "hydra.launcher.signal_delay_s=30", "hydra.launcher.max_num_timeout=15",
            "hardware.slurm.cpus_per_task=1",  # the other CPU stays free for the other Slurm tests
        ],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=QUIET,
    )
    deadline = time.monotonic() + 900
    while child.poll() is None:
        assert time.monotonic() < deadline, "the sweep did not finish in 15 minutes"
        release_requeued_jobs()
        time.sleep(1)
    stdout, stderr = child.communicate()
    result = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    run_dir = sweep / "0_magrpo_seed42"
    log = (run_dir / "launch.log").read_text()
    assert "RunInterrupted: SIGUSR2 at env step" in log or "no checkpoint point within" in log, log[-3000:]
    assert "resuming from" in log, log[-3000:]
    assert (run_dir / "status").read_text() == "completed\n"
    assert records(run_dir) == records(reference)
    for policy in ("agent_0", "agent_1"):
        ours, theirs = weights(run_dir, policy), weights(reference, policy)
        assert ours.keys() == theirs.keys() and all((ours[k] == theirs[k]).all() for k in ours), policy
