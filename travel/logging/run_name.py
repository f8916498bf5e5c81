"""W&B run identity: name, group and tags of a run, from its config (README, "W&B run names").

- MAGRPO (no preference collection): `Travel-magrpo-<model>-hard-budget-<N>train` (N train rows), with `cenactor` after the
  algorithm for the joint actor: `Travel-magrpo-cenactor-qwen3-4b-hard-budget-60train`.
- Preference algorithms: `travel-<algorithm>[-cenactor][-central][-<teacher>cmp]-seed<S>-<job>`, e.g.
  `travel-marlhf-iter-currentcmp-seed42-<job>`, `travel-marlhf-iter-central-currentcmp-seed42-<job>` (decentralized
  actors, central teacher) and `travel-marlhf-iter-cenactor-central-currentcmp-seed42-<job>` (the joint actor's
  comparator writes joint actions, so it is central too). The teacher label is `current` (current_copy),
  `history<k>` or the comparator model's name; `current` alone is never used for the comparator.
- `<job>` is the Slurm job id (array jobs: `<array job>_<task>`) when there is one, else `local`.
- The group is the name without seed and job, plus the replay setting of iterative methods
  (`...-replay-lambda_decay0.8`), so a seed sweep's runs share one group. Tags add the layout, the algorithm,
  the comparator and the replay setting to the logger's own tags.
A non-null `logger.name` or `logger.group` wins over the computed one.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from travel.algorithms.core.config import CollectionOptions


@dataclass(frozen=True)
class RunIdentity:
    name: str
    group: str
    tags: tuple[str, ...]


def slurm_job_label(environ: Mapping[str, str] = os.environ) -> str:
    """The Slurm job id of this process (`<array job>_<task>` for an array task), or `local`."""
    array_job, task = environ.get("SLURM_ARRAY_JOB_ID"), environ.get("SLURM_ARRAY_TASK_ID")
    if array_job and task:
        return f"{array_job}_{task}"
    return environ.get("SLURM_JOB_ID") or "local"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def model_label(model_name: str) -> str:
    """`qwen3_4b_instruct` -> `qwen3-4b`; a hub id or path keeps its last component."""
    return re.sub(r"-instruct(-\d+)?$", "", _slug(str(model_name).rstrip("/").split("/")[-1]))


def teacher_label(comparator: Any) -> Optional[str]:
    """The comparator's label in names: current (current_copy), history<k>, or the model's name; None: none."""
    if not comparator.active:
        return None
    if comparator.policy == "current_copy":
        return "current"
    if comparator.policy == "history":
        return f"history{comparator.history_k}"
    return model_label(str(comparator.model_name))


def run_identity(
    *,
    algorithm: Any,
    comparator: Any,
    joint_actor: bool,
    model_name: str,
    train_rows: int,
    seed: int,
    job: str,
    base_tags: Sequence[str] = (),
) -> RunIdentity:
    """The computed name, group and tags of a run (see the module docstring)."""
    algo = _slug(algorithm.name)
    layout = ["cenactor"] if joint_actor else []
    tags = [*base_tags, "centralized-actor" if joint_actor else "decentralized-actor", algorithm.name]

    if not isinstance(algorithm, CollectionOptions):  # online task-reward training (MAGRPO)
        name = "-".join(["Travel", algo, *layout, model_label(model_name), "hard-budget", f"{train_rows}train"])
        return RunIdentity(name, name, tuple(dict.fromkeys(tags)))
    teacher = teacher_label(comparator)
    central = ["central"] if teacher is not None and (joint_actor or comparator.generation_mode == "centralized") else []
    stem = ["travel", algo, *layout, *central, *([f"{teacher}cmp"] if teacher else [])]
    name = "-".join([*stem, f"seed{seed}", job])
    group = "-".join(stem)
    if algorithm.iterative:
        lam = getattr(algorithm, "preference_replay_lambda", None)
        replay = f"replay-{algorithm.preference_replay_mode}" + ("" if lam is None else f"{lam:g}")
        group = f"{group}-{replay}"
        tags += [replay, f"comparator-{comparator.name}", f"generation-{comparator.generation_mode}"]
    return RunIdentity(name, group, tuple(dict.fromkeys(tags)))
