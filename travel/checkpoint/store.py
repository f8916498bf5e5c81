"""Checkpoints of a training run, and resuming from one.

`checkpoints/env_step_<N>/` in the run directory, written atomically (travel.io.atomic_directory: a kill
leaves the previous checkpoints and no partial one under that name), the newest `checkpoint.keep` kept:

- `actors/<policy>/`: each policy's weights (as mode=eval loads them);
- `optimizers.pt`: each policy's AdamW state;
- `rng.pt`: Python's, NumPy's and torch's CPU and CUDA generator states, and each policy's sampling generator;
- `trainer.json`: the trainer's position (travel/algorithms' `checkpoint_state`), the evaluations so far, the
  byte length of metrics.jsonl at this point and the W&B run id;
- what the trainer adds (`extra`): a preference run's replay shards, comparator state and reward model
  (travel/algorithms/preference/checkpoint.py);
- `digests.json`: the sha256 of every file above;
- `checkpoint.json`, written last inside the directory: env_step, algorithm, layout.

Resume rebuilds the run from its config, loads all of it, cuts metrics.jsonl back to the recorded length
and continues, so an interrupted and resumed run writes the same records and weights as an uninterrupted one.
It first checks every file against its digest: `resume=auto` skips a checkpoint that does not verify (saying
which file and why) for the newest one that does. Optimizer and RNG states are tensors and plain containers,
loaded with `weights_only=True`: a file that holds anything else is refused, never unpickled.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from travel.checkpoint.signals import RunInterrupted
from travel.io import atomic_directory, remove_directory, write_json_atomic

CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_META = "checkpoint.json"
DIGESTS = "digests.json"
_NAME = re.compile(r"env_step_(\d+)")


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed from; the message names it and the option."""


def rng_state(layout: Any) -> dict[str, Any]:
    """Every generator's state as tensors and plain containers (NumPy's key array as a tensor)."""
    import numpy

    name, keys, position, has_gauss, cached = numpy.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(keys.astype(numpy.int64)), int(position), int(has_gauss), float(cached)),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "policies": [None if a.generator is None else a.generator.get_state() for a in layout.actors],
    }


def restore_rng(state: dict[str, Any], layout: Any) -> None:
    import numpy

    random.setstate(state["python"])
    name, keys, position, has_gauss, cached = state["numpy"]
    numpy.random.set_state((name, keys.numpy().astype(numpy.uint32), position, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    for actor, generator_state in zip(layout.actors, state["policies"]):
        if generator_state is not None:
            actor.generator.set_state(generator_state)


def save_plain(state: Any, path: Path) -> None:
    """torch.save through a Python stream, so that a full disk surfaces as its OSError (travel.io names it)."""
    with open(path, "wb") as stream:
        torch.save(state, stream)


def load_plain(path: Path) -> Any:
    """A torch file of tensors and plain containers, loaded with `weights_only=True`; a file holding anything else
    (which loading could run as code) or one that cannot be read is an error naming it."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as refused:
        reason = str(refused).strip().splitlines()[0]
        raise CheckpointError(f"{path}: refused: it holds more than tensors and plain containers ({reason})") from None
    except (OSError, RuntimeError, EOFError) as unreadable:
        raise CheckpointError(f"{path}: cannot be read ({unreadable})") from None


def load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as unreadable:
        raise CheckpointError(f"{path}: cannot be read ({unreadable})") from None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 24), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_digests(directory: Path) -> dict[str, str]:
    """The sha256 of every file under `directory` (but the digests and the completion marker), by relative path."""
    return {
        path.relative_to(directory).as_posix(): _sha256(path)
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name not in (DIGESTS, CHECKPOINT_META)
    }


def verify_checkpoint(path: Path) -> None:
    """Every file `digests.json` records is there with its digest, or an error naming the first that is not."""
    recorded = path / DIGESTS
    if not recorded.is_file():
        raise CheckpointError(f"{recorded}: missing (every checkpoint records its files' digests)")
    for name, digest in load_json(recorded).items():
        file = path / name
        if not file.is_file():
            raise CheckpointError(f"{file}: missing")
        if _sha256(file) != digest:
            raise CheckpointError(f"{file}: corrupted (its sha256 is not the one {DIGESTS} recorded)")


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    env_step: int
    trainer: dict[str, Any]  # trainer.json
    meta: dict[str, Any]  # checkpoint.json: env_step, algorithm, layout

    def check_matches(self, meta: dict[str, Any]) -> None:
        """The run resuming this checkpoint has its algorithm and layout."""
        for key, value in meta.items():
            if key in self.meta and self.meta[key] != value:
                raise CheckpointError(
                    f"resume={self.path}: a checkpoint of {key} {self.meta[key]!r}, but this run's is {value!r}"
                )

    def restore(self, layout: Any) -> None:
        """Weights, optimizer states and every RNG into a freshly built layout of the same run."""
        optimizers, rng = load_plain(self.path / "optimizers.pt"), load_plain(self.path / "rng.pt")
        layout.load(self.path / "actors")
        for actor, state in zip(layout.actors, optimizers):
            actor.optimizer.load_state_dict(state)
        restore_rng(rng, layout)


def checkpoint_env_step(path: Path) -> Optional[int]:
    match = _NAME.fullmatch(path.name)
    return int(match.group(1)) if match and (path / CHECKPOINT_META).is_file() else None


def complete_checkpoints(run_dir: str | Path) -> list[Path]:
    """The run's complete checkpoints, oldest first."""
    root = Path(run_dir) / CHECKPOINT_DIR
    found = [(checkpoint_env_step(p), p) for p in root.iterdir()] if root.is_dir() else []
    return [p for step, p in sorted((s, p) for s, p in found if s is not None)]


def load_checkpoint(path: str | Path) -> Checkpoint:
    """The complete checkpoint at `path`, every file checked against its digest."""
    path = Path(path)
    if checkpoint_env_step(path) is None:
        raise CheckpointError(f"resume={path}: not a complete checkpoint (checkpoints/env_step_<N> with {CHECKPOINT_META})")
    verify_checkpoint(path)
    meta = load_json(path / CHECKPOINT_META)
    return Checkpoint(path, int(meta["env_step"]), load_json(path / "trainer.json"), meta)


def resolve_resume(resume: Optional[str], run_dir: str | Path) -> Optional[Checkpoint]:
    """The checkpoint `resume` names: None without resume; `auto`: the newest complete one of `run_dir` that
    verifies, saying which it skipped and why (None when the run has none yet: it starts from the beginning);
    else the checkpoint directory given."""
    if resume is None:
        return None
    if resume != "auto":
        return load_checkpoint(resume)
    found = complete_checkpoints(run_dir)
    reasons = []
    for path in reversed(found):
        try:
            return load_checkpoint(path)
        except CheckpointError as reason:
            print(f"resume=auto: skipping {path}: {reason}", flush=True)
            reasons.append(str(reason))
    if found:
        raise CheckpointError(f"resume=auto: no checkpoint of {run_dir} verifies ({'; '.join(reasons)})")
    return None


def check_checkpoint_options(keep: Any, every_env_steps: Any) -> None:
    """`checkpoint.keep` and `checkpoint.every_env_steps`, or an error naming the option."""
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise CheckpointError(f"checkpoint.keep={keep!r}: expected an integer >= 1")
    if every_env_steps is not None and (isinstance(every_env_steps, bool) or not isinstance(every_env_steps, int) or every_env_steps < 1):
        raise CheckpointError(f"checkpoint.every_env_steps={every_env_steps!r}: expected an integer >= 1, or null")


class CheckpointStore:
    """Writes the run's checkpoints (see the module docstring) and prunes all but the newest `keep`."""

    def __init__(
        self,
        run_dir: str | Path,
        *,
        keep: int = 2,
        every_env_steps: Optional[int] = None,
        meta: Optional[dict] = None,
        last_env_step: Optional[int] = None,
    ):
        """`last_env_step`: the env step of the checkpoint a resumed run continues from, where the
        every_env_steps cadence counts on from."""
        check_checkpoint_options(keep, every_env_steps)
        self.run_dir = Path(run_dir)
        self.keep = keep
        self.every_env_steps = every_env_steps
        self.meta = dict(meta or {})
        self._last = last_env_step

    def due(self, env_step: int, at_eval_point: bool) -> bool:
        """At each evaluation point by default; every `every_env_steps` env steps when that is set."""
        if self.every_env_steps is None:
            return at_eval_point
        return self._last is None or env_step - self._last >= self.every_env_steps

    def save(
        self,
        env_step: int,
        layout: Any,
        trainer: dict[str, Any],
        tracker: Any = None,
        extra: Optional[Callable[[Path], None]] = None,
    ) -> Path:
        """`extra(directory)` writes what the trainer keeps beyond weights, optimizers, RNGs and `trainer`."""
        self._remove_leftovers()
        path = self.run_dir / CHECKPOINT_DIR / f"env_step_{env_step}"
        record = {
            **trainer,
            "metrics_bytes": tracker.position() if tracker is not None else None,
            "wandb_run_id": getattr(getattr(tracker, "wandb_run", None), "id", None),
        }
        with atomic_directory(path) as partial:
            for actor in layout.actors:
                actor.model.save_pretrained(partial / "actors" / layout.policy_dir(actor.agent_id))
            save_plain([actor.optimizer.state_dict() for actor in layout.actors], partial / "optimizers.pt")
            save_plain(rng_state(layout), partial / "rng.pt")
            write_json_atomic(partial / "trainer.json", record)
            if extra is not None:
                extra(partial)
            write_json_atomic(partial / DIGESTS, file_digests(partial))
            write_json_atomic(partial / CHECKPOINT_META, {**self.meta, "env_step": env_step})
        self._last = env_step
        for old in complete_checkpoints(self.run_dir)[: -self.keep]:
            # renamed away first: a kill during the removal must not leave a half-deleted "complete" checkpoint
            trash = old.parent / f".{old.name}.removing"
            remove_directory(trash)
            os.rename(old, trash)
            remove_directory(trash)
        return path

    def _remove_leftovers(self) -> None:
        """Hidden partial or half-removed checkpoints a killed run left behind."""
        root = self.run_dir / CHECKPOINT_DIR
        for leftover in root.glob(".env_step_*") if root.is_dir() else ():
            remove_directory(leftover)


def checkpoint_point(store: Optional[CheckpointStore], stop: Any, env_step: int, at_eval_point: bool, save: Callable[[], Path]) -> None:
    """A point where a trainer may checkpoint: `save()` writes one when it is due here (store.due) or a stop was
    requested and the run stops here (travel.checkpoint.signals.StopRequest.stops_here); after a stop request's
    checkpoint the run ends with RunInterrupted."""
    stopping = stop is not None and stop.stops_here()
    if store is None or not (stopping or store.due(env_step, at_eval_point)):
        return
    if stopping:
        stop.checkpoint_reached()
    path = save()
    if stopping:
        raise RunInterrupted(f"{stop.reason} at env step {env_step}: wrote {path}; resume=auto continues", stop.signum)
