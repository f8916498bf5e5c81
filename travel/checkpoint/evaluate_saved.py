"""mode=eval: evaluate saved actors on the eval pool, with no training.

    python launch.py mode=eval checkpoint=outputs/magrpo/42_.../actors           # a finished run's actors
    python launch.py mode=eval checkpoint=outputs/magrpo/42_...                  # the same, by its run directory
    python launch.py mode=eval checkpoint=.../checkpoints/env_step_<N>           # a checkpoint

The saved run's own config.yaml (found beside `actors/`, or two levels up from a checkpoint) fixes the data,
split, model, actor layout, generation settings, reward and (unless the command line sets hardware) the
hardware; the command line gives the logger. A `_target_` in it outside the project (`travel.`) is refused.
Each policy loads its own weights (actors/agent_0 and agent_1, or actors/joint). The evaluation is the
terminal one of training: greedy, every eval row, the first panel as the fixed-anchor eval/* point. It
writes eval_final.json, summary.md and the eval/* record of metrics.jsonl into this run's directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

if TYPE_CHECKING:
    from travel.run import Run

from travel.checkpoint.store import CHECKPOINT_META
from travel.logging.report import format_held_out_table, write_summary


@dataclass(frozen=True)
class SavedActors:
    run_root: Path  # the run directory whose config.yaml describes the actors
    actors: Path  # holds agent_0/ and agent_1/, or joint/
    env_step: int  # the training env step the weights belong to


def find_saved_actors(path: str | Path) -> SavedActors:
    """The saved actors at `path`: a run directory, its actors/ directory, or a checkpoint directory."""
    given = Path(path)
    if not given.is_dir():
        raise FileNotFoundError(f"checkpoint={path}: no such directory")
    actors = given / "actors" if (given / "actors").is_dir() else given
    root = next((d for d in (given, given.parent, given.parent.parent) if (d / "config.yaml").is_file()), None)
    if root is None:
        raise FileNotFoundError(f"checkpoint={path}: no config.yaml of the run at it or up to two levels above")
    if (given / CHECKPOINT_META).is_file():
        env_step = int(json.loads((given / CHECKPOINT_META).read_text())["env_step"])
    elif (root / "eval_final.json").is_file():
        env_step = int(json.loads((root / "eval_final.json").read_text())["env_step"])
    else:
        raise FileNotFoundError(f"checkpoint={path}: neither {CHECKPOINT_META} nor the run's eval_final.json says its env step")
    return SavedActors(root, actors, env_step)


def _overrides_hardware() -> bool:
    """Whether this command line chose the hardware (hardware=... or hardware.*=...)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return False
    return any(item.lstrip("+~").startswith("hardware") for item in HydraConfig.get().overrides.task)


OWN_TARGETS = "travel."  # the only `_target_`s a saved config may name


def check_own_targets(node: Any, source: Path, where: str = "") -> None:
    """Every `_target_` in a saved config names the project's own code (under `travel.`), or an error naming the
    key: evaluating a run directory someone shared must not run code of theirs."""
    if isinstance(node, dict):
        for key, value in node.items():
            at = f"{where}.{key}" if where else str(key)
            if key == "_target_" and not (isinstance(value, str) and value.startswith(OWN_TARGETS)):
                raise ValueError(f"{source}: {at}={value!r} is not the project's own ({OWN_TARGETS}*): refused")
            check_own_targets(value, source, at)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            check_own_targets(value, source, f"{where}[{index}]")


def saved_run_config(run: "Run", saved: SavedActors, own_hardware: bool = False) -> DictConfig:
    """The saved run's config, built only from the project's own `_target_`s, with this command's mode and logger,
    and its hardware when it chose one."""
    path = saved.run_root / "config.yaml"
    cfg = OmegaConf.load(path)
    check_own_targets(OmegaConf.to_container(cfg, resolve=False), path)
    for key in ("mode", "logger", *(("hardware",) if own_hardware else ())):
        cfg[key] = run.cfg[key]
    cfg.checkpoint = str(saved.actors)
    return cfg


def format_metrics(metrics: dict[str, float], env_step: int) -> str:
    width = max(len(name) for name in metrics)
    lines = [f"saved actors at env step {env_step}: fixed-anchor evaluation (greedy)"]
    lines += [f"{name.removeprefix('eval/'):<{width}}  {value:>9.4f}" for name, value in metrics.items()]
    return "\n".join(lines)


def evaluate_saved(run: "Run") -> dict[str, Any]:
    target = OmegaConf.select(run.cfg, "checkpoint", default=None)
    if not isinstance(target, str):
        raise ValueError(
            "mode=eval needs checkpoint=<dir>: a run directory, its actors/ directory, or checkpoints/env_step_<N>/"
        )
    saved = find_saved_actors(target)
    # the saved run's own options, built as this run was (type(run): no import of travel.run from here)
    evaluating = type(run)(saved_run_config(run, saved, _overrides_hardware()), run_dir=str(run.run_dir), score=run.score)
    evaluating._prepare_torch()
    tracker = instantiate(run.cfg.logger)(run_dir=run.run_dir, config=OmegaConf.to_container(evaluating.cfg, resolve=True))
    layout = sampler = None
    try:
        layout = instantiate(evaluating.cfg.actor)(
            instantiate(evaluating.cfg.model, _partial_=True),
            evaluating.hardware,
            evaluating.generation,
            learning_rate=evaluating.algorithm.learning_rate,
            seed=int(evaluating.cfg.seed),
        )
        layout.load(saved.actors)
        sampler, evaluator = evaluating.evaluation_parts(layout, tracker)
        point = evaluator.terminal(saved.env_step, run.run_dir)
    finally:
        for part in (sampler, layout):
            if part is not None:
                part.close()
        tracker.close()
    tables = [format_metrics(point.public, saved.env_step)]
    if point.held_out:
        tables.append(format_held_out_table(point.held_out, saved.env_step))
    print("\n\n".join(tables))
    write_summary(run.run_dir, f"evaluation of {saved.actors}", *tables)
    print(f"wrote {run.run_dir}")
    return {"env_step": saved.env_step, "eval": point.public, "eval_full": point.full}
