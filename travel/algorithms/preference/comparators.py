"""Comparators of the iterative preference algorithms: who writes the candidates the actors are compared with.

- `current_copy`: the actors' pre-update weights sampled with an independent, persistent random stream.
  On the actors' own device the live weights are used (no copy); on another comparator device a frozen copy.
- `history` (`history1` = k 1): the checkpoint saved at the end of iteration t - k (the initial weights when
  t - k <= 0). history1 is the previous iteration's ending checkpoint, normally the same weights the
  current actors start iteration t with; it is not one round staler than that.
- `model`: a frozen external model (`comparator.comparator_model_name`) whose token-to-id vocabulary must
  equal the actors', checked before anything is generated, because replay keeps exact token ids.

Comparator weights are loaded for one collection phase and released when it ends (before reward-model
fitting). Identical frozen weights on one comparator device are loaded once and shared by both role calls.
With generation_mode=centralized one teacher writes both role actions (travel.algorithms.preference.central_teacher).
`ComparatorSpec.from_config` also rejects option combinations that cannot work, naming the options.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from travel.algorithms.core.registry import registered
from travel.algorithms.preference.policy_checkpoints import PolicyCheckpoints

POLICIES = ("none", "current_copy", "history", "model")
GENERATION_MODES = ("decentralized", "centralized")


class ComparatorConfigError(ValueError):
    """A comparator option, or a combination of options, that cannot work; the message names them."""


@dataclass(frozen=True)
class ComparatorSpec:
    name: str
    policy: str
    generation_mode: str = "decentralized"
    history_k: Optional[int] = None
    model_name: Optional[str] = None
    devices: tuple[str, ...] = ()
    teacher_agent_index: int = 0

    @property
    def active(self) -> bool:
        return self.policy != "none"

    @classmethod
    def from_config(cls, cfg: Any, algorithm: Any) -> "ComparatorSpec":
        """From the composed config's `comparator` and `generation_mode` nodes and the typed algorithm config."""
        from omegaconf import OmegaConf

        comparator = cfg.get("comparator") or {"name": "none", "policy": "none"}
        mode_node = cfg.get("generation_mode") or {"name": "decentralized"}
        name, policy, mode = str(comparator["name"]), str(comparator["policy"]), str(mode_node["name"])
        iterative = algorithm.iterative
        if policy not in POLICIES:
            raise ComparatorConfigError(f"comparator.policy={policy!r}: choose one of {', '.join(POLICIES)}")
        if mode not in GENERATION_MODES:
            raise ComparatorConfigError(f"generation_mode={mode!r}: choose one of {', '.join(GENERATION_MODES)}")
        if iterative and policy == "none":
            raise ComparatorConfigError(
                f"algorithm={algorithm.name} compares the actors with a comparator each iteration, but "
                f"comparator=none gives none: use comparator=current_copy (the default), history1 or model"
            )
        if not iterative and policy != "none":
            raise ComparatorConfigError(
                f"comparator={name} needs an iterative algorithm ({', '.join(registered(iterative=True))}); "
                f"algorithm={algorithm.name} has no comparator refresh: use comparator=none"
            )
        if mode == "centralized" and policy == "none":
            raise ComparatorConfigError(
                f"generation_mode=centralized selects who writes comparator candidates, but comparator=none "
                f"(algorithm={algorithm.name}) has none: use generation_mode=decentralized"
            )
        history_k = model_name = None
        if policy == "history":
            history_k = comparator.get("comparator_history_k")
            if isinstance(history_k, bool) or not isinstance(history_k, int) or history_k < 1:
                raise ComparatorConfigError(f"comparator.comparator_history_k={history_k!r}: expected an integer >= 1")
        if policy == "model":
            if OmegaConf.is_config(comparator) and OmegaConf.is_missing(comparator, "comparator_model_name"):
                model_name = None
            else:
                model_name = comparator.get("comparator_model_name")
            if not model_name:
                raise ComparatorConfigError(
                    f"comparator={name} needs comparator.comparator_model_name (a hub id or local directory "
                    f"of a model with the actors' vocabulary)"
                )
        devices: tuple[str, ...] = ()
        if policy != "none":
            raw = algorithm.comparator_devices
            if raw is None or isinstance(raw, str) or len(raw) != 2:
                raise ComparatorConfigError(f"algorithm.comparator_devices={raw!r}: give one device per role")
            devices = tuple(str(d) for d in raw)
        teacher = int(mode_node.get("teacher_agent_index", 0))
        if teacher not in (0, 1):
            raise ComparatorConfigError(f"generation_mode.teacher_agent_index={teacher}: must be 0 or 1")
        return cls(name, policy, mode, history_k, str(model_name) if model_name else None, devices, teacher)


def comparator_seed(seed: int) -> int:
    """The comparator stream's seed: the negated run seed (1 for seed 0), as the earlier library chose."""
    return -seed if seed else 1


def device_key(device: Any) -> str:
    """A canonical device name: "cuda" and "cuda:0" name the same device."""
    import torch

    device = torch.device(device)
    return f"cuda:{device.index or 0}" if device.type == "cuda" else str(device)


class RngStream:
    """A persistent random stream independent of the global RNG: one torch.Generator per device, created
    on first use and advancing across calls and iterations."""

    def __init__(self, seed: int):
        self.seed = seed
        self._generators: dict[str, Any] = {}

    def generator(self, device: Any) -> Any:
        import torch

        key = device_key(device)
        if key not in self._generators:
            self._generators[key] = torch.Generator(device=key).manual_seed(self.seed)
        return self._generators[key]

    def state(self) -> dict[str, Any]:
        """Each device's generator state (what a checkpoint keeps)."""
        return {key: generator.get_state() for key, generator in self._generators.items()}

    def restore(self, states: Mapping[str, Any]) -> None:
        import torch

        self._generators = {}
        for key, state in states.items():
            self._generators[key] = torch.Generator(device=key)
            self._generators[key].set_state(state)


# ---- weights ----------------------------------------------------------------------------------------


def frozen_copy(model: Any, device: Any, state: Optional[Mapping[str, Any]] = None) -> Any:
    """A frozen (eval, no grad) model of `model`'s architecture on `device` holding `state` (default: the
    model's own weights). A transformers model is built directly on `device`, so the source device never
    holds a second copy."""
    import torch

    state = model.state_dict() if state is None else state
    config = getattr(model, "config", None)
    if config is not None and hasattr(type(model), "_from_config"):
        dtype = next(model.parameters()).dtype
        with torch.device(device):
            clone = type(model)._from_config(config, dtype=dtype)
    else:
        clone = copy.deepcopy(model).to(device)
    clone.load_state_dict(state)
    clone.eval()
    clone.requires_grad_(False)
    return clone


def same_weights(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two state dicts hold identical tensors (stops at the first difference)."""
    import torch

    if a.keys() != b.keys():
        return False
    return all(a[k].shape == b[k].shape and torch.equal(a[k].to(b[k].device), b[k]) for k in a)


# ---- the comparator ---------------------------------------------------------------------------------


@dataclass
class ComparatorPolicies:
    """The comparator of one collection phase: a model and a generator per policy of the actors' layout."""

    label: str
    models: tuple[Any, ...]
    generators: tuple[Any, ...]

    @property
    def shared(self) -> bool:
        return len(self.models) == 2 and self.models[0] is self.models[1]


def vocabulary_mismatch(reference: Any, other: Any) -> Optional[str]:
    """None when both tokenizers map the same tokens to the same ids, else a short description."""
    a, b = reference.get_vocab(), other.get_vocab()
    if a == b:
        return None
    missing = sorted(set(a) - set(b))[:3]
    extra = sorted(set(b) - set(a))[:3]
    moved = sorted(t for t in set(a) & set(b) if a[t] != b[t])[:3]
    return f"{len(a)} vs {len(b)} tokens; missing {missing}, extra {extra}, different ids {moved}"


class Comparator:
    """Builds the comparator models of each collection phase; see the module docstring."""

    def __init__(
        self,
        spec: ComparatorSpec,
        *,
        seed: int,
        actor_devices: Sequence[Any],
        checkpoint_dir: Optional[str | Path] = None,
        load_model: Optional[Callable[[str, Any], tuple[Any, Any]]] = None,
        load_tokenizer: Optional[Callable[[str], Any]] = None,
    ):
        if not spec.active:
            raise ComparatorConfigError(f"comparator={spec.name} has no comparator policy to build")
        self.spec = spec
        self.actor_devices = tuple(device_key(d) for d in actor_devices)
        self.stream = RngStream(comparator_seed(seed))
        self.checkpoints = None
        if spec.policy == "history":
            if checkpoint_dir is None:
                raise ComparatorConfigError("comparator=history needs a policy checkpoint directory in the run dir")
            self.checkpoints = PolicyCheckpoints(checkpoint_dir, int(spec.history_k or 1))
        if spec.policy == "model" and load_model is None:
            raise ComparatorConfigError(f"comparator=model needs a loader for {spec.model_name}")
        self.load_model = load_model
        self.load_tokenizer = load_tokenizer
        self._loaded: Optional[ComparatorPolicies] = None

    # lifecycle hooks the iterative trainers call
    def start(self, actor_models: Sequence[Any]) -> None:
        if self.checkpoints is not None:
            self.checkpoints.save(0, actor_models)

    def end_iteration(self, iteration: int, actor_models: Sequence[Any]) -> None:
        if self.checkpoints is not None:
            self.checkpoints.save(iteration, actor_models)

    def check_vocabulary(self, actor_tokenizers: Sequence[Any], comparator_tokenizer: Any) -> None:
        for agent_id, tokenizer in enumerate(actor_tokenizers):
            problem = vocabulary_mismatch(tokenizer, comparator_tokenizer)
            if problem:
                raise ComparatorConfigError(
                    f"comparator.comparator_model_name={self.spec.model_name}: its token-to-id vocabulary differs "
                    f"from agent {agent_id}'s ({problem}); replay keeps exact token ids, so the comparator must "
                    f"share the actors' vocabulary"
                )

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(device_key(d) for d in self.spec.devices)

    def _share(self, states: Sequence[Mapping[str, Any]], build: Callable[[int, str], Any]) -> tuple[Any, ...]:
        """One model per policy; two role policies with identical weights on one device share one."""
        devices = self.devices
        first = build(0, devices[0])
        if len(states) == 1:
            return (first,)
        if devices[0] == devices[1] and same_weights(states[0], states[1]):
            return first, first
        return first, build(1, devices[1])

    def _build(
        self, iteration: int, actor_models: Sequence[Any], actor_tokenizers: Sequence[Any]
    ) -> ComparatorPolicies:
        policies = range(len(actor_models))  # two role actors, or one joint actor
        devices = self.devices
        generators = tuple(self.stream.generator(devices[i]) for i in policies)
        if self.spec.policy == "current_copy":
            models = tuple(actor_models[i] if devices[i] == self.actor_devices[i] else None for i in policies)
            if None in models:
                live = [m.state_dict() for m in actor_models]
                copies = self._share(live, lambda i, d: frozen_copy(actor_models[i], d))
                models = tuple(m if m is not None else copies[i] for i, m in enumerate(models))
            return ComparatorPolicies("current_copy", models, generators)  # type: ignore[arg-type]
        if self.spec.policy == "history":
            assert self.checkpoints is not None
            source = self.checkpoints.source_iteration(iteration)
            states = [self.checkpoints.load(source, i) for i in policies]

            def restored(i: int, device: str) -> Any:
                return frozen_copy(actor_models[i], device, states[i])

            label = f"history{self.spec.history_k}:{PolicyCheckpoints.label(source)}"
            return ComparatorPolicies(label, self._share(states, restored), generators)  # type: ignore[arg-type]
        name = str(self.spec.model_name)
        if self.load_tokenizer is not None:
            self.check_vocabulary(actor_tokenizers, self.load_tokenizer(name))
        assert self.load_model is not None
        loaded: dict[str, Any] = {}
        for device in dict.fromkeys(devices[i] for i in policies):
            model, tokenizer = self.load_model(name, device)
            self.check_vocabulary(actor_tokenizers, tokenizer)
            model.eval()
            model.requires_grad_(False)
            loaded[device] = model
        return ComparatorPolicies(name, tuple(loaded[devices[i]] for i in policies), generators)

    @contextmanager
    def collection(
        self, iteration: int, actor_models: Sequence[Any], actor_tokenizers: Sequence[Any] = ()
    ) -> Iterator[ComparatorPolicies]:
        """The comparator of iteration `iteration` (1-based) for one collection phase; released on exit."""
        if iteration < 1:
            raise ValueError(f"iterations count from 1, got {iteration}")
        self._loaded = self._build(iteration, actor_models, actor_tokenizers)
        try:
            yield self._loaded
        finally:
            self.release()

    def release(self) -> None:
        """Drop comparator-only weights (never the live actors) and return their memory."""
        import gc

        import torch

        self._loaded = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


# ---- sampling from the comparator ---------------------------------------------------------------------


class ComparatorRolePolicy:
    """A rollout Policy for one role that samples from the comparator's model with the comparator's random
    stream, under the actor's own prompt, tokenizer and decoding settings (travel.agents.actors.Actor):
    the actor's decoder when the model is the actor's, else a copy of its settings over the other weights."""

    def __init__(self, actor: Any, model: Any, generator: Any):
        self.agent_id = actor.agent_id
        self.actor = actor
        self.generator = generator
        self.decoder = actor.decoder if model is actor.model else actor.decoder.with_model(model)

    def prompt_ids(self, row: Any) -> Sequence[int]:
        return self.actor.prompt_ids(row)

    def sample(self, row: Any, num_candidates: int, *, greedy: bool = False) -> list[Any]:
        if greedy:
            raise ValueError("comparator candidates are sampled, never greedy")
        (candidates,) = self.decoder.generate(
            [self.actor.request(row)], num_candidates, greedy=False, generator=self.generator
        )
        return list(candidates)
