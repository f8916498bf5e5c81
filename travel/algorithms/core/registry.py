"""The algorithm registry: each algorithm is declared once, by name, with its typed config, its budget and
its trainer. Run, the dry report and the smoke experiment ask the registry; no other code compares
algorithm names.

An algorithm's module calls `register(AlgorithmSpec(...))` at import; `conf/algorithm/<name>.yaml` names its
config class as `_target_`. Before any config is composed, `load_algorithms` reads the `_target_` of every
`algorithm/*.yaml` in conf/ and in the directories the command line adds to Hydra's search path, and imports
those modules: their presets and `registered()` then see every algorithm, and adding one means one module and
one YAML.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Protocol, Sequence

from travel.algorithms.core.config import AlgorithmConfig, AlgorithmConfigError, CollectionOptions

if TYPE_CHECKING:
    from travel.algorithms.core.budgets import Budget
    from travel.data.curriculum import CurriculumSplit

CONF_DIR = Path(__file__).resolve().parents[3] / "conf"


class AdvantageEstimator(Protocol):
    """The advantages of the K joint actions of one prompt, from their rewards. An estimator that keeps state
    across groups (a running baseline) also has `state_dict()` and `load_state_dict(state)`, which checkpoints
    keep."""

    def __call__(self, rewards: Sequence[float]) -> list[float]: ...


@dataclass(frozen=True)
class TrainingParts:
    """What the Run builds for a trainer. Each algorithm's `build_trainer` takes the parts it needs."""

    actors: Any
    sampler: Any
    evaluator: Any
    tracker: Any
    run_dir: "Path"
    split: "CurriculumSplit"
    short_epochs: int
    reward_config: Any
    seed: int
    score: Optional[Callable[..., Any]] = None
    comparator_spec: Any = None
    model_factory: Optional[Callable[..., Any]] = None
    gradient_checkpointing: bool = False
    checkpoints: Any = None  # travel.checkpoint.store.CheckpointStore (algorithms whose spec has `checkpoints`)
    resume: Any = None  # the Checkpoint the run resumes from, already restored into `actors`
    stop: Any = None  # travel.checkpoint.signals.StopRequest


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm.

    - `budget(config, split, short_epochs) -> Budget`: what mode=dry reports and the trainer checks itself against.
    - `build_trainer(config, parts) -> trainer` with `train() -> TrainResult`.
    - `advantage(config) -> AdvantageEstimator`: the online trainers' advantage estimation (None: the algorithm
      has no online phase).
    - `presets`: per experiment, the algorithm options it sets. `experiment=smoke` applies `presets["smoke"]`
      (by default the `SMOKE` options of the config's option groups, travel/algorithms/core/config.py) over the
      algorithm's YAML and under the command line: `register` stores each preset in Hydra's ConfigStore as
      `algorithm_preset/<experiment>_<name>`, which conf/config.yaml's defaults list selects.
    """

    name: str
    config: type[AlgorithmConfig]
    budget: Callable[[Any, "CurriculumSplit", int], "Budget"]
    build_trainer: Callable[[Any, TrainingParts], Any]
    presets: Optional[Mapping[str, Mapping[str, Any]]] = None
    checkpoints: bool = False  # its trainer writes checkpoints and resumes from them (TrainingParts.checkpoints)
    advantage: Optional[Callable[[Any], AdvantageEstimator]] = None

    @property
    def preference(self) -> bool:
        """Collects labelled pairs: mode=train checks the comparator before any weights load."""

        return issubclass(self.config, CollectionOptions)


PRESET_GROUP = "algorithm_preset"
_REGISTRY: dict[str, AlgorithmSpec] = {}


def register(spec: AlgorithmSpec) -> AlgorithmSpec:
    from dataclasses import fields, replace

    from hydra.core.config_store import ConfigStore

    if spec.name in _REGISTRY and _REGISTRY[spec.name].config is not spec.config:
        raise ValueError(f"algorithm {spec.name!r} is registered twice ({_REGISTRY[spec.name].config.__name__}, {spec.config.__name__})")
    default_name = spec.config.__dataclass_fields__["name"].default
    if default_name != spec.name:
        raise ValueError(f"{spec.config.__name__}.name defaults to {default_name!r}, but it is registered as {spec.name!r}")
    if spec.presets is None:
        spec = replace(spec, presets={"smoke": spec.config.smoke_options()})
    known = {option.name for option in fields(spec.config)}
    for preset, values in spec.presets.items():
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"algorithm {spec.name!r}: preset {preset!r} sets unknown options {', '.join(unknown)}")
        ConfigStore.instance().store(group=PRESET_GROUP, name=f"{preset}_{spec.name}", node=dict(values), package="algorithm")
    _REGISTRY[spec.name] = spec
    return spec


def algorithm_dirs(overrides: Iterable[str] = ()) -> list[Path]:
    """conf/algorithm/ and the `algorithm/` of every directory that `overrides` (a command line) adds to Hydra's
    search path: `hydra.searchpath=[file://DIR, pkg://PACKAGE.PATH]` and `--config-dir DIR` (`-cd`)."""
    dirs, given = [CONF_DIR], list(overrides)
    for index, item in enumerate(given):
        if item.startswith(("--config-dir=", "-cd=")):
            dirs.append(Path(item.split("=", 1)[1]))
        elif item in ("--config-dir", "-cd") and index + 1 < len(given):
            dirs.append(Path(given[index + 1]))
        elif item.lstrip("+").startswith("hydra.searchpath="):
            for entry in re.split(r"\s*,\s*", item.split("=", 1)[1].strip("[] ")):
                entry = entry.strip("'\"")
                if entry.startswith("file://"):
                    dirs.append(Path(entry[len("file://") :]))
                elif entry.startswith("pkg://"):
                    package = entry[len("pkg://") :].replace("/", ".")
                    spec = importlib.util.find_spec(package.split(".")[0])
                    if spec is not None and spec.submodule_search_locations:
                        dirs.append(Path(list(spec.submodule_search_locations)[0]).joinpath(*package.split(".")[1:]))
    return [directory / "algorithm" for directory in dirs]


def load_algorithms(overrides: Iterable[str] = ()) -> None:
    """Imports the module of every algorithm YAML's `_target_` (algorithm_dirs), before a config is composed, so
    each registers itself and its presets. A `_target_` whose module cannot be imported is an error naming the
    YAML."""
    import yaml

    for directory in algorithm_dirs(overrides):
        for path in sorted(directory.glob("*.yaml")):
            node = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            target = node.get("_target_") if isinstance(node, dict) else None
            if not isinstance(target, str) or "." not in target:
                continue  # no config class: algorithm_config names the YAML when it is chosen
            module = target.rsplit(".", 1)[0]
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise AlgorithmConfigError(f"{path}: _target_ {target}: cannot import {module} ({exc})") from exc


def registered(*, iterative: Optional[bool] = None) -> list[str]:
    """Every registered algorithm's name (the built-in ones always), optionally only the (non-)iterative ones."""
    load_algorithms()
    return [name for name, spec in _REGISTRY.items() if iterative is None or spec.config.iterative == iterative]


def spec_named(name: str) -> AlgorithmSpec:
    """The registered algorithm `name` (algorithm=<name>)."""
    load_algorithms()
    if name not in _REGISTRY:
        raise AlgorithmConfigError(f"algorithm={name!r} is not registered; choose one of {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def _config_class(node: Any) -> type[AlgorithmConfig]:
    target = node.get("_target_") if hasattr(node, "get") else None
    if not target:
        raise AlgorithmConfigError(
            f"algorithm={node.get('name') if hasattr(node, 'get') else node!r} has no `_target_`: "
            f"conf/algorithm/<name>.yaml names the algorithm's config class"
        )
    from hydra.utils import get_class

    cls = get_class(str(target))
    if not (isinstance(cls, type) and issubclass(cls, AlgorithmConfig)):
        raise AlgorithmConfigError(f"algorithm._target_={target}: not an algorithm config class")
    return cls


def spec_for(config: AlgorithmConfig | type[AlgorithmConfig]) -> AlgorithmSpec:
    cls = config if isinstance(config, type) else type(config)
    for spec in _REGISTRY.values():
        if spec.config is cls:
            return spec
    raise AlgorithmConfigError(f"{cls.__name__} is not registered: its module must call travel.algorithms.core.registry.register")


def advantage_estimator(config: AlgorithmConfig) -> AdvantageEstimator:
    """The advantage estimator the algorithm's spec names, built from its config."""
    spec = spec_for(config)
    if spec.advantage is None:
        raise AlgorithmConfigError(f"algorithm={spec.name} names no advantage estimator (AlgorithmSpec.advantage)")
    return spec.advantage(config)


def algorithm_config(node: Any) -> AlgorithmConfig:
    """The typed config of the composed `algorithm` node (its `_target_` class, validated)."""
    cls = _config_class(node)
    config = cls.from_mapping(node)
    spec = spec_for(cls)  # an unregistered class fails here, naming itself
    if config.name != spec.name:
        raise AlgorithmConfigError(f"algorithm.name={config.name!r}, but algorithm._target_ is registered as {spec.name!r}")
    return config
