"""Tracker: every metric record goes to `metrics.jsonl`; a compact allow-listed surface goes to W&B.

W&B conventions (docs/reward.md "What is logged"): `env_step` is a hidden x-axis with no summary, `eval/*` and
`turn_1/*` are plotted against it, `iter/*` against `iter/current_iteration`; `wandb.log` is never given
an explicit `step=`, so W&B's own history step advances independently and two records at the same env
step never overwrite each other. `train/*`, `eval_full/*` and sample tables are never uploaded.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Mapping, Optional

UPLOADED = (
    re.compile(r"eval/[a-z0-9_]+"),
    re.compile(r"turn_1/(reward_mean|expected_return)"),
    re.compile(r"iter/[a-z0-9_/]+"),
)


def uploadable(key: str) -> bool:
    return any(pattern.fullmatch(key) for pattern in UPLOADED)


WANDB_MODES = ("online", "offline", "disabled")


def check_logger_options(backend: str, mode: Optional[str]) -> None:
    """logger=none writes metrics.jsonl only: a W&B mode there is a mistake, named (it would turn W&B on)."""
    if backend == "none" and mode is not None:
        raise ValueError(f"logger.mode={mode}: W&B needs logger=wandb (logger=none writes metrics.jsonl only)")
    if backend == "wandb" and mode not in (None, *WANDB_MODES):
        raise ValueError(f"logger.mode={mode!r}: choose one of {', '.join(WANDB_MODES)}")


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return value


class Tracker:
    """Append-only metrics log (flushed per record, so a crash keeps what was written) plus optional W&B."""

    def __init__(
        self,
        run_dir: str | Path,
        mode: Optional[str] = None,  # None: no W&B; else "online" | "offline" | "disabled"
        project: str = "Travel",
        entity: Optional[str] = None,
        name: Optional[str] = None,
        group: Optional[str] = None,
        tags: tuple[str, ...] = (),
        config: Optional[Mapping[str, Any]] = None,
        resume_bytes: Optional[int] = None,
        run_id: Optional[str] = None,
        backend: str = "wandb",
    ):
        """`resume_bytes`: a resumed run's metrics.jsonl is cut back to this length (its checkpoint's position)
        and continued; `run_id`: the W&B run to continue; `backend`: the logger option (`none` takes no mode)."""
        check_logger_options(backend, mode)
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / "metrics.jsonl"
        if resume_bytes is not None and self.path.exists():
            with self.path.open("r+b") as handle:
                handle.truncate(int(resume_bytes))
        self._file = self.path.open("a", encoding="utf-8")
        self._wandb = None
        if mode is not None:
            self._init_wandb(mode, project, entity, name, group, tags, config, run_id)

    def position(self) -> int:
        """The byte length of metrics.jsonl so far (what a checkpoint records)."""
        self._file.flush()
        return self.path.stat().st_size

    def _init_wandb(self, mode, project, entity, name, group, tags, config, run_id=None) -> None:
        if mode not in ("online", "offline", "disabled"):
            raise ValueError(f"logger.mode={mode!r}: choose online, offline or disabled")
        import wandb

        self._wandb = wandb.init(
            mode=mode,
            project=project,
            entity=entity,
            name=name,
            group=group,
            tags=list(tags),
            dir=str(self.run_dir),
            config=dict(config or {}),
            reinit="finish_previous",
            **({"id": run_id, "resume": "allow"} if run_id else {}),
        )
        self._wandb.define_metric("env_step", hidden=True, summary="none")
        self._wandb.define_metric("eval/*", step_metric="env_step")
        self._wandb.define_metric("turn_1/*", step_metric="env_step")
        self._wandb.define_metric("iter/current_iteration", hidden=True, summary="none")
        self._wandb.define_metric("iter/*", step_metric="iter/current_iteration")

    @property
    def wandb_run(self):
        return self._wandb

    def log(self, metrics: Mapping[str, Any], *, env_step: int, upload: bool = True) -> None:
        """Write one record; with W&B, also upload its allow-listed keys (one committed write)."""
        record = {"env_step": int(env_step), **{k: _jsonable(v) for k, v in metrics.items()}}
        self._file.write(json.dumps(record, sort_keys=False) + "\n")
        self._file.flush()
        if self._wandb is not None and upload:
            payload = {k: v for k, v in record.items() if uploadable(k)}
            if payload:
                axis = {"iter/current_iteration": record["iter/current_iteration"]} if "iter/current_iteration" in record else {}
                self._wandb.log({"env_step": int(env_step), **axis, **payload})

    def log_media(self, media: Mapping[str, Any], *, env_step: int, iteration: Optional[int] = None) -> None:
        """Upload W&B media (plots) under allow-listed keys; a no-op without W&B. Media never go to
        metrics.jsonl: the numbers behind them are logged there by the caller."""
        if self._wandb is None:
            return
        rejected = [key for key in media if not uploadable(key)]
        if rejected:
            raise ValueError(f"media key {rejected[0]!r} is outside the uploaded surface")
        axis = {} if iteration is None else {"iter/current_iteration": int(iteration)}
        self._wandb.log({"env_step": int(env_step), **axis, **media})

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None

    def __enter__(self) -> "Tracker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
