"""Preference runs survive too: the reduced smoke runs of the four preference algorithms (tests/preference_runs.py:
MARLHF-iter with its reward model, MADPO-iter's two iterations against a history1 comparator), stopped by SIGTERM
and resumed with resume=auto, write the records and the final weights of the same run uninterrupted, bit for bit.

The signal goes out once the run has logged its first collection (MADPO-iter: its second iteration's), so the run
stops at the next checkpoint point with training still ahead: MADPO's first DPO batch, MARLHF's first online
evaluation after its reward-model fit, and MADPO-iter's second iteration, whose comparator is the policy
checkpoint the resumed run restores.

The stopped and resumed runs log to metrics.jsonl alone, without W&B (whose start-up is about 4 s of each launch):
the records compared are metrics.jsonl's, and W&B's own resume, the same code for every algorithm (travel/run.py),
is checked on MAGRPO's stopped run (tests/checkpoint/test_resume.py).
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.checkpoint.test_resume import records, weights
from tests.kill import terminate_when
from tests.preference_runs import ALGORITHMS, ENV, command, launch, smoke_overrides
from travel.checkpoint.store import complete_checkpoints

SIGNAL_AFTER = {"madpo_iter": '"iter/current_iteration": 2'}  # else the first collection's record


def stop_and_resume(run_dir):
    """The run stopped by SIGTERM (see the module docstring): (checkpoints left, status, the resumed run)."""
    overrides = smoke_overrides(run_dir.name, wandb=False)
    child = subprocess.Popen(
        command(run_dir, *overrides), cwd=run_dir.parent, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    marker, metrics = SIGNAL_AFTER.get(run_dir.name, '"time/collection_s"'), run_dir / "metrics.jsonl"
    terminate_when(child, lambda: metrics.is_file() and marker in metrics.read_text(), f"{run_dir.name} logged {marker}")
    stopped = [path.name for path in complete_checkpoints(run_dir)]
    return stopped, (run_dir / "status").read_text(), launch(run_dir, *overrides, "resume=auto")


@pytest.fixture(scope="module")
def resumed(preference_smoke_runs, tmp_path_factory):
    """{algorithm: (reference run dir, resumed run dir, checkpoints left by the stop, its status, the resumed run)}."""
    base = tmp_path_factory.mktemp("preference_resume")
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = dict(zip(ALGORITHMS, pool.map(stop_and_resume, [base / algorithm for algorithm in ALGORITHMS])))
    return {
        algorithm: (preference_smoke_runs[algorithm][0], base / algorithm, *outcomes[algorithm]) for algorithm in ALGORITHMS
    }


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_stopped_preference_run_resumes_to_the_uninterrupted_records_and_weights(resumed, algorithm):
    reference, run_dir, stopped, status, result = resumed[algorithm]
    assert status.startswith("stopped\nRunInterrupted: SIGTERM at env step "), status
    assert stopped and f"wrote {run_dir / 'checkpoints' / stopped[-1]};" in status, (stopped, status)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    assert f"resuming from {run_dir / 'checkpoints' / stopped[-1]}" in result.stdout
    assert records(run_dir) == records(reference)  # no record lost or written twice
    for policy in ("agent_0", "agent_1"):
        ours, theirs = weights(run_dir, policy), weights(reference, policy)
        assert ours.keys() == theirs.keys(), policy
        changed = [k for k in ours if not (ours[k] == theirs[k]).all()]
        assert not changed, (policy, changed[:5])
    assert (run_dir / "status").read_text() == "completed\n"
