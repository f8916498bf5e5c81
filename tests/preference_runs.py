"""The reduced preference smoke runs that several test modules read: `python launch.py experiment=smoke
algorithm=X` for the four preference algorithms on 2 train rows and one epoch, logging to W&B offline.
MARLHF-iter runs one iteration against the current-copy comparator; MADPO-iter two iterations against a history1
comparator (its second iteration samples its training pairs from both iterations' shards and compares against
a stored policy checkpoint).
tests/conftest.py runs them once per session (`preference_smoke_runs`)."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAUNCH = REPO / "launch.py"
ALGORITHMS = ("madpo", "madpo_iter", "marlhf", "marlhf_iter")
REDUCED = ["curriculum.train_per_cell=1", "algorithm.num_train_epochs=1"]
OFFLINE_WANDB = ["logger=wandb", "logger.mode=offline"]
DPO_REDUCED = ["algorithm.train_batch_size=1", "algorithm.eval_every_updates=1"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "WANDB_SILENT": "true"}


def command(run_dir: Path, *overrides: str) -> list[str]:
    return [sys.executable, str(LAUNCH), "experiment=smoke", f"hydra.run.dir={run_dir}", *overrides]


def launch(run_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        command(run_dir, *overrides), cwd=run_dir.parent, env=ENV, capture_output=True, text=True, timeout=900
    )


def smoke_overrides(algorithm: str, wandb: bool = True) -> list[str]:
    """What the reduced smoke run of `algorithm` sets on the command line (`wandb`: logging to W&B offline too)."""
    extra = DPO_REDUCED if algorithm.startswith("madpo") else []
    history = ["comparator=history1", "algorithm.num_iterations=2"] if algorithm == "madpo_iter" else []
    return [f"algorithm={algorithm}", *REDUCED, *extra, *history, *(OFFLINE_WANDB if wandb else [])]


def run_all(base: Path) -> dict[str, tuple[Path, str]]:
    """Every algorithm's reduced smoke run under `base` (two at a time): {algorithm: (run_dir, stdout)}."""

    def one(algorithm: str):
        return algorithm, launch(base / algorithm, *smoke_overrides(algorithm))

    with ThreadPoolExecutor(max_workers=2) as pool:
        done = dict(pool.map(one, ALGORITHMS))
    for algorithm, result in done.items():
        assert result.returncode == 0, f"{algorithm}:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return {algorithm: (base / algorithm, result.stdout) for algorithm, result in done.items()}
