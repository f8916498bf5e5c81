"""Pytest fixture for tests that need a real Slurm cluster (see scripts/slurm/).

`slurm_cluster` yields the partition to submit to. When no usable cluster is found the
test is skipped with the reason, unless TRAVEL_REQUIRE_SLURM=1 is set (as in CI), in which
case it fails: a cluster that should be there but is not must not pass silently.

Usage in a test module:

    from tests.slurm_fixtures import slurm_cluster  # noqa: F401  (pytest finds it by name)

    def test_something(slurm_cluster: str) -> None:
        subprocess.run(["sbatch", f"--partition={slurm_cluster}", ...])
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

REQUIRE_SLURM_ENV = "TRAVEL_REQUIRE_SLURM"
PARTITION_ENV = "TRAVEL_SLURM_PARTITION"
REQUIRED_COMMANDS = ("sinfo", "sbatch", "scontrol")
# Node states (sinfo %t) in which a node can run a job soon. A suffix such as '*' (not
# responding) or '~' (powered off) means it cannot, so states are matched exactly.
USABLE_NODE_STATES = frozenset({"idle", "mix", "alloc", "comp"})
_QUERY_TIMEOUT_S = 20


class SlurmUnavailable(Exception):
    """No Slurm cluster that tests can submit to; the message says why."""


def _query(command: list[str]) -> str:
    """Run a Slurm client command and return its stdout, or raise SlurmUnavailable."""
    try:
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=_QUERY_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise SlurmUnavailable(f"`{' '.join(command)}` timed out after {_QUERY_TIMEOUT_S}s") from error
    if completed.returncode != 0:
        # Keep the words of the message, not scontrol's banner of asterisks.
        lines = (line.strip(" *") for line in (completed.stderr + completed.stdout).splitlines())
        detail = "; ".join(line for line in lines if line) or f"exit code {completed.returncode}"
        raise SlurmUnavailable(f"`{' '.join(command)}` failed: {detail}")
    return completed.stdout


def choose_partition(sinfo_partitions: str, requested: str | None) -> str:
    """Pick the partition from `sinfo --noheader --format=%P` output.

    `requested` wins when it exists; otherwise the default partition (marked with '*'),
    else the first one listed.
    """
    names: list[str] = []
    default: str | None = None
    for line in sinfo_partitions.splitlines():
        field = line.strip()
        if not field:
            continue
        name = field.rstrip("*")
        if name not in names:
            names.append(name)
        if field.endswith("*") and default is None:
            default = name
    if not names:
        raise SlurmUnavailable("sinfo lists no partitions")
    if requested:
        if requested not in names:
            raise SlurmUnavailable(f"partition {requested!r} (from {PARTITION_ENV}) not in {names}")
        return requested
    return default or names[0]


def has_usable_node(sinfo_states: str) -> bool:
    """True when `sinfo --noheader --format=%t` lists a node able to run jobs."""
    states = {line.strip() for line in sinfo_states.splitlines()}
    return bool(states & USABLE_NODE_STATES)


def find_slurm_partition() -> str:
    """Return a partition of a reachable cluster with a usable node, or raise SlurmUnavailable."""
    missing = [command for command in REQUIRED_COMMANDS if shutil.which(command) is None]
    if missing:
        raise SlurmUnavailable(
            f"Slurm client commands not on PATH: {', '.join(missing)} "
            "(run scripts/slurm/setup_local_slurm.sh as root)"
        )
    _query(["scontrol", "ping"])
    partition = choose_partition(
        _query(["sinfo", "--noheader", "--format=%P"]), os.environ.get(PARTITION_ENV) or None
    )
    states = _query(["sinfo", "--noheader", f"--partition={partition}", "--format=%t"])
    if not has_usable_node(states):
        listed = " ".join(states.split()) or "none"
        raise SlurmUnavailable(f"partition {partition!r} has no usable node (states: {listed})")
    return partition


def skip_or_fail(reason: str) -> None:
    """Skip the test, or fail it when TRAVEL_REQUIRE_SLURM=1 says the cluster must exist."""
    if os.environ.get(REQUIRE_SLURM_ENV) == "1":
        pytest.fail(f"Slurm cluster required ({REQUIRE_SLURM_ENV}=1) but unavailable: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """The partition to submit test jobs to; skips or fails when there is no cluster."""
    try:
        return find_slurm_partition()
    except SlurmUnavailable as error:
        skip_or_fail(f"no usable Slurm cluster: {error}")
        raise  # unreachable: skip_or_fail always raises
