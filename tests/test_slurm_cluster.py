"""The local Slurm cluster (scripts/slurm/setup_local_slurm.sh) runs real batch jobs, and the
`slurm_cluster` fixture finds it, skipping or failing (TRAVEL_REQUIRE_SLURM=1) without it."""

from __future__ import annotations

import os
import stat
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.slurm_fixtures import (
    REQUIRE_SLURM_ENV,
    SlurmUnavailable,
    choose_partition,
    find_slurm_partition,
    has_usable_node,
    skip_or_fail,
    slurm_cluster,  # noqa: F401  (fixture, used by name)
)

JOB_TIMEOUT_S = 120


# --- fixture logic, without a cluster -------------------------------------------------


def test_choose_partition_prefers_the_default_marked_with_a_star() -> None:
    assert choose_partition("debug\nlocal*\ngpu\n", requested=None) == "local"


def test_choose_partition_falls_back_to_the_first_listed() -> None:
    assert choose_partition("alpha\nbeta\n", requested=None) == "alpha"


def test_choose_partition_honours_an_existing_requested_partition() -> None:
    assert choose_partition("debug\nlocal*\n", requested="debug") == "debug"


def test_choose_partition_rejects_an_unknown_request_or_no_partitions() -> None:
    with pytest.raises(SlurmUnavailable, match="'nope'"):
        choose_partition("local*\n", requested="nope")
    with pytest.raises(SlurmUnavailable, match="no partitions"):
        choose_partition("\n", requested=None)


@pytest.mark.parametrize(
    ("states", "usable"),
    [("idle\n", True), ("down*\nmix\n", True), ("down*\ndrain\n", False), ("idle*\n", False), ("", False)],
)
def test_has_usable_node(states: str, usable: bool) -> None:
    assert has_usable_node(states) is usable


def _fake_commands(directory: Path, scripts: dict[str, str]) -> None:
    for name, body in scripts.items():
        path = directory / name
        path.write_text("#!/bin/sh\n" + body + "\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_missing_client_commands_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SlurmUnavailable, match="sinfo, sbatch, scontrol"):
        find_slurm_partition()


def test_unreachable_controller_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_commands(
        tmp_path,
        {
            "scontrol": 'echo "Slurmctld(primary) at node1 is DOWN" >&2; exit 1',
            "sinfo": "exit 0",
            "sbatch": "exit 0",
        },
    )
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/usr/bin:/bin")
    with pytest.raises(SlurmUnavailable, match="is DOWN"):
        find_slurm_partition()


def test_partition_with_only_drained_nodes_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sinfo = 'case "$*" in *%P*) printf "work*\\n" ;; *) printf "drain\\n" ;; esac'
    _fake_commands(tmp_path, {"scontrol": "exit 0", "sinfo": sinfo, "sbatch": "exit 0"})
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/usr/bin:/bin")
    monkeypatch.delenv("TRAVEL_SLURM_PARTITION", raising=False)
    with pytest.raises(SlurmUnavailable, match="'work' has no usable node"):
        find_slurm_partition()


def test_reachable_cluster_yields_its_default_partition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sinfo = 'case "$*" in *%P*) printf "other\\nwork*\\n" ;; *) printf "idle\\n" ;; esac'
    _fake_commands(tmp_path, {"scontrol": "exit 0", "sinfo": sinfo, "sbatch": "exit 0"})
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/usr/bin:/bin")
    monkeypatch.delenv("TRAVEL_SLURM_PARTITION", raising=False)
    assert find_slurm_partition() == "work"


def test_unavailable_cluster_skips_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_SLURM_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="^gone$"):
        skip_or_fail("gone")


def test_unavailable_cluster_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_SLURM_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="required.*gone"):
        skip_or_fail("gone")


# --- the setup script's command line, without touching the machine ----------------------

SETUP_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "slurm" / "setup_local_slurm.sh"


def _run_setup(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SETUP_SCRIPT), *arguments], capture_output=True, text=True, timeout=30, check=False
    )


def test_setup_help_documents_every_option() -> None:
    completed = _run_setup("--help")
    assert completed.returncode == 0, completed.stderr
    for option in ("--partition", "--spool-dir", "--conf-dir", "--no-install", "--no-accounting", "--stop"):
        assert option in completed.stdout


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--bogus",), "unknown option '--bogus'"),
        (("--partition", "two words"), "partition name 'two words'"),
        (("--mem-margin", "95"), "--mem-margin must be a whole percentage below 90"),
        (("--spool-dir", "relative/dir"), "must be absolute paths"),
    ],
)
def test_setup_rejects_bad_arguments_before_changing_anything(arguments: tuple[str, ...], message: str) -> None:
    completed = _run_setup(*arguments)
    assert completed.returncode != 0
    assert message in completed.stderr


# --- real jobs on the cluster ---------------------------------------------------------


def _sbatch_wait(
    partition: str, workdir: Path, script: str
) -> tuple[subprocess.CompletedProcess[str], str]:
    """Submit `script` with the flags the submitit launcher uses and wait for it to end."""
    command = [
        "sbatch",
        "--wait",
        "--parsable",
        f"--partition={partition}",
        "--nodes=1",
        "--ntasks-per-node=1",
        "--cpus-per-task=1",
        "--mem=1G",
        "--time=5",
        f"--chdir={workdir}",
        f"--output={workdir}/slurm-%j.out",
        "--job-name=travel-cluster-test",
        f"--wrap={script}",
    ]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=JOB_TIMEOUT_S, check=False)
    # --parsable prints "jobid" or "jobid;cluster" on the first line.
    job_id = completed.stdout.strip().splitlines()[0].split(";")[0] if completed.stdout.strip() else ""
    return completed, job_id


def test_batch_job_runs_and_writes_a_file(slurm_cluster: str, tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    result_file = tmp_path / "result.txt"
    script = (
        f'printf "%s\\n%s\\n%s\\n%s\\n" "{token}" "$SLURM_JOB_ID" "$SLURM_JOB_PARTITION" '
        f'"$SLURM_CPUS_PER_TASK" > {result_file}'
    )
    completed, job_id = _sbatch_wait(slurm_cluster, tmp_path, script)
    assert completed.returncode == 0, completed.stderr
    assert job_id.isdigit(), completed.stdout
    assert result_file.read_text().splitlines() == [token, job_id, slurm_cluster, "1"]


def test_batch_job_exit_code_reaches_the_submitter(slurm_cluster: str, tmp_path: Path) -> None:
    completed, job_id = _sbatch_wait(slurm_cluster, tmp_path, "exit 3")
    assert job_id.isdigit(), completed.stdout + completed.stderr
    assert completed.returncode == 3


def _accounting_enabled() -> bool:
    config = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    return "accounting_storage/none" not in config


def test_accounting_records_the_job_state(slurm_cluster: str, tmp_path: Path) -> None:
    """submitit polls sacct to notice jobs that died without writing a result."""
    if not _accounting_enabled():
        skip_or_fail("accounting is disabled (accounting_storage/none), so sacct has no job records")
    completed, job_id = _sbatch_wait(slurm_cluster, tmp_path, "exit 2")
    assert completed.returncode == 2 and job_id.isdigit(), completed.stdout + completed.stderr
    # slurmctld hands job records to slurmdbd asynchronously: poll briefly.
    deadline = time.monotonic() + 30
    state = ""
    while time.monotonic() < deadline:
        sacct = subprocess.run(
            ["sacct", "--noheader", "--parsable2", "--format=JobID,State,ExitCode", f"--jobs={job_id}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        rows = [line.split("|") for line in sacct.stdout.splitlines()]
        state = next((row[1] for row in rows if row[0] == job_id), "")
        if state == "FAILED":
            assert next(row[2] for row in rows if row[0] == job_id) == "2:0"
            return
        time.sleep(0.5)
    pytest.fail(f"sacct never reported job {job_id} as FAILED (last state {state!r})")
