"""What a preference run adds to a checkpoint (travel/checkpoint/store.py), and restores from one.

- `preference.pt`: the run's counts, its replay/shuffle RNG and the comparator's random streams;
- `preference_replay/`: the replay shards stored so far;
- `policy_checkpoints/`: the history comparator's policy checkpoints (comparator=history<k>);
- `training_pairs.json`: the pairs the DPO pass in progress draws its batches from (a replay shard's format).

The shards and policy checkpoints are hard links where the file system allows (their files are written once and
replaced by rename, never changed in place), so a checkpoint of a 4B pair costs no second copy of its history.
On resume they replace the run directory's own, which may hold shards or policy checkpoints written after the
checkpoint by the interrupted run.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from travel.algorithms.core.results import PreferenceCounts
from travel.algorithms.preference.replay import batch_from_payload, shard_payload
from travel.checkpoint.store import load_plain, save_plain
from travel.io import atomic_directory, write_json_atomic

if TYPE_CHECKING:
    from travel.algorithms.preference.batch import PreferenceBatch
    from travel.algorithms.preference.loop import PreferenceRun

PREFERENCE_STATE = "preference.pt"
TRAINING_PAIRS = "training_pairs.json"


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or links not allowed
        shutil.copy2(source, target)


def _mirror(source: Path, target: Path) -> None:
    """`target` becomes a copy of `source` (hard links), or disappears when `source` does not exist."""
    if not source.is_dir():
        if target.exists():
            shutil.rmtree(target)
        return
    with atomic_directory(target) as partial:
        partial.rmdir()
        shutil.copytree(source, partial, copy_function=_link_or_copy, ignore=shutil.ignore_patterns(".*"))


def _trees(run: "PreferenceRun") -> dict[str, Path]:
    """The run-directory trees a checkpoint keeps, by their name inside the checkpoint."""
    trees = {"preference_replay": run.replay.directory}
    if run.comparator is not None and run.comparator.checkpoints is not None:
        trees["policy_checkpoints"] = run.comparator.checkpoints.directory
    return trees


def save_preference_state(run: "PreferenceRun", directory: Path, training_pairs: Optional["PreferenceBatch"] = None) -> None:
    """Write the run's part of a checkpoint into `directory` (a checkpoint being written)."""

    state = {
        "counts": run.counts.as_dict(),
        "rng": run.rng.getstate(),
        "comparator_stream": run.comparator.stream.state() if run.comparator is not None else None,
    }
    save_plain(state, directory / PREFERENCE_STATE)
    for name, tree in _trees(run).items():
        _mirror(tree, directory / name)
    if training_pairs is not None:
        write_json_atomic(directory / TRAINING_PAIRS, shard_payload(training_pairs, 0))


def restore_preference_state(run: "PreferenceRun", directory: Path) -> Optional["PreferenceBatch"]:
    """Restore the run's part of the checkpoint at `directory`; returns the DPO pass's pairs, when it kept them."""
    import json

    state: dict[str, Any] = load_plain(directory / PREFERENCE_STATE)
    run.counts = PreferenceCounts(**state["counts"])
    run.rng.setstate(state["rng"])
    if run.comparator is not None and state["comparator_stream"] is not None:
        run.comparator.stream.restore(state["comparator_stream"])
    for name, tree in _trees(run).items():
        _mirror(directory / name, tree)
    run.replay.reload()
    pairs = directory / TRAINING_PAIRS
    if not pairs.is_file():
        return None
    return batch_from_payload(json.loads(pairs.read_text(encoding="utf-8")), run.replay.kind, str(pairs))
