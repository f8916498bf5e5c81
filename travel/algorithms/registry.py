"""The algorithm registry: each algorithm is declared once, by name, with its typed config, its budget and
its trainer. Run, the dry report and the smoke experiment ask the registry; no other code compares
algorithm names.

An algorithm's module calls `register(AlgorithmSpec(...))` at import; `conf/algorithm/<name>.yaml` names its
config class as `_target_`, so composing the YAML is enough to find the module, and adding an algorithm
means one module and one YAML.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from travel.algorithms.config import AlgorithmConfig, AlgorithmConfigError

if TYPE_CHECKING:
    from pathlib import Path

    from travel.algorithms.budgets import Budget
    from travel.data.curriculum import CurriculumSplit

# The project's own algorithms, imported when a listing of every algorithm is needed (error messages).
BUILTIN_MODULES = ("travel.algorithms.magrpo", "travel.algorithms.madpo", "travel.algorithms.marlhf")


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
    - `presets`: per experiment, the algorithm options it sets. `experiment=smoke` applies `presets["smoke"]`
      (by default the `SMOKE` options of the config's option groups, travel/algorithms/config.py) over the
      algorithm's YAML and under the command line: `register` stores each preset in Hydra's ConfigStore as
      `algorithm_preset/<experiment>_<name>`, which conf/config.yaml's defaults list selects.
    """

    name: str
    config: type[AlgorithmConfig]
    budget: Callable[[Any, "CurriculumSplit", int], "Budget"]
    build_trainer: Callable[[Any, TrainingParts], Any]
    presets: Optional[Mapping[str, Mapping[str, Any]]] = None
    checkpoints: bool = False  # its trainer writes checkpoints and resumes from them (TrainingParts.checkpoints)

    @property
    def preference(self) -> bool:
        """Collects labelled pairs: mode=train checks the comparator before any weights load."""
        from travel.algorithms.config import CollectionOptions

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


def load_algorithms() -> None:
    """Registers the built-in algorithms (and their presets) before a config is composed."""
    for module in BUILTIN_MODULES:
        importlib.import_module(module)


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
    raise AlgorithmConfigError(f"{cls.__name__} is not registered: its module must call travel.algorithms.registry.register")


def algorithm_config(node: Any) -> AlgorithmConfig:
    """The typed config of the composed `algorithm` node (its `_target_` class, validated)."""
    cls = _config_class(node)
    config = cls.from_mapping(node)
    spec = spec_for(cls)  # an unregistered class fails here, naming itself
    if config.name != spec.name:
        raise AlgorithmConfigError(f"algorithm.name={config.name!r}, but algorithm._target_ is registered as {spec.name!r}")
    return config
