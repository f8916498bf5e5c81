"""Policy layouts: the trainable policies of a run, how they are built (`build_layout`), act, update and are placed.

`build_layout` validates `hardware.agent_devices` before it calls the model factory, so a device that does not
exist fails before any weights load.

- `decentralized` (actor=decentralized): two role actors, two prompts, two role actions;
- `centralized` (actor=centralized): one joint actor, one joint prompt with both role contexts, one joint
  action under the sum of the role budgets, split into the two role actions for the reward
  (travel/task/joint_action.py). Its joint tokens and masks are what trains.

Trainers, comparators and the evaluator reach the policies through a layout: `actors` (each with
`agent_id`, the policy index, its model, optimizer and decoder), `role_actions`, `prompts`, `update_each`
and `save`. `update_each` runs one update per policy:
- hardware=1xb200: all actors live on cuda:0 and update one after the other; with
  `offload_inactive_actor=true` (for a GPU that cannot hold both), while one updates, the other and its
  optimizer state wait in reusable pinned host memory (`parking.py`), and come back even if the update fails;
- hardware=2gpu (`parallel_training=per_device`): one actor per device, updated in parallel threads;
- hardware=cpu: one after the other, no moves.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence, TypeVar

import torch

from travel.agents.actors import Actor
from travel.agents.compiled_layers import compile_update_layers
from travel.agents.devices import agent_devices
from travel.agents.hardware import HardwareConfig
from travel.agents.models import checkpoint_first_layers
from travel.agents.parking import HostStash
from travel.generation.config import GenerationConfig
from travel.generation.model_io import compute_autocast
from travel.task.joint_action import CENTRALIZED_JOINT, DECENTRALIZED, split_joint_action

if TYPE_CHECKING:
    from travel.data.row import TravelRow

T = TypeVar("T")
CPU = torch.device("cpu")


class PolicyLayout:
    """The trainable policies of a run and how they act and update. Subclasses fix the number of policies,
    their prompts and how one candidate per policy becomes the two role actions the reward scores."""

    kind: str = DECENTRALIZED
    name: str = "decentralized"
    num_policies: int = 2
    joint: bool = False  # whether the policies write joint actions

    def __init__(self, actors: Sequence["Actor"], *, parallel: bool = False, offload_inactive: bool = False):
        self.actors = tuple(actors)
        if len(self.actors) != self.num_policies:
            raise ValueError(
                f"a {self.name} layout has {self.num_policies} {'policy' if self.num_policies == 1 else 'policies'}, "
                f"got {len(self.actors)}"
            )
        for expected, actor in enumerate(self.actors):
            if getattr(actor, "agent_id", expected) != expected:
                raise ValueError(f"policy {expected} has agent_id {actor.agent_id}; policies must be in agent order")
        self.parallel = parallel
        self.offload_inactive = offload_inactive and not parallel
        self._workers = [ThreadPoolExecutor(max_workers=1) for _ in self.actors] if parallel else None

    def __iter__(self) -> Iterator["Actor"]:
        return iter(self.actors)

    def __getitem__(self, agent_id: int) -> "Actor":
        return self.actors[agent_id]

    def only_active(self, active: "Actor") -> contextlib.AbstractContextManager[None]:
        """Move every other GPU actor (model and optimizer state) to the CPU when offloading is on, and back."""
        return _parked([a for a in self.actors if a is not active and self.offload_inactive])

    def all_on_cpu(self) -> contextlib.AbstractContextManager[None]:
        """Every actor waits on the CPU (e.g. while a reward model fits), and comes back even if the body fails."""
        return _parked(self.actors)

    def update_each(self, step: Callable[["Actor"], T]) -> list[T]:
        """`step(actor)` for every actor, in agent order of the results."""
        if self._workers is not None:
            futures = [worker.submit(_in_compute_dtype, step, actor) for worker, actor in zip(self._workers, self.actors)]
            return [future.result() for future in futures]
        results = []
        for actor in self.actors:
            with self.only_active(actor):
                results.append(_in_compute_dtype(step, actor))
        return results

    @staticmethod
    def output_budget(role_tokens: int) -> int:
        """Most generated tokens of one policy's action, given generation.max_new_tokens per role action."""
        return role_tokens

    def role_actions(self, texts: Sequence[str]) -> tuple[str, str]:
        """The (logistics, experience) action texts of one candidate per policy."""
        raise NotImplementedError

    def prompts(self, row: "TravelRow") -> tuple[str, ...]:
        """Each policy's rendered prompt for `row`."""
        return tuple(actor.request(row).prompt for actor in self.actors)

    def save(self, directory: str | Path) -> list[Path]:
        return [actor.save(Path(directory) / self.policy_dir(actor.agent_id)) for actor in self.actors]

    def load(self, directory: str | Path) -> None:
        """Each policy's weights from its own subdirectory of `directory` (as `save` wrote them)."""
        directory = Path(directory)
        for actor in self.actors:
            path = directory / self.policy_dir(actor.agent_id)
            if not path.exists():
                found = sorted(p.name for p in directory.iterdir() if not p.name.startswith(".")) if directory.is_dir() else []
                raise FileNotFoundError(
                    f"{directory} has no {path.name}/ for the {self.name} layout (actor={self.name}); it holds {found}"
                )
            actor.load(path)

    def policy_dir(self, policy: int) -> str:
        """The directory name of a policy's saved weights."""
        return f"agent_{policy}"

    def close(self) -> None:
        for worker in self._workers or ():
            worker.shutdown(wait=True)
        self._workers = None


def _in_compute_dtype(step: Callable[["Actor"], T], actor: "Actor") -> T:
    """`step(actor)` under the autocast its decoder decodes with (hardware.compute_dtype)."""

    compute_dtype = getattr(getattr(actor, "decoder", None), "compute_dtype", None)
    if compute_dtype is None:
        return step(actor)
    with compute_autocast(actor.device, compute_dtype):
        return step(actor)


@contextlib.contextmanager
def _parked(actors: list["Actor"]) -> Iterator[None]:
    moved = [actor for actor in actors if actor.device.type != "cpu"]
    for actor in moved:
        actor.to(CPU)
    if moved and torch.cuda.is_available():
        torch.cuda.empty_cache()
    try:
        yield
    finally:
        for actor in moved:
            actor.to(actor.device)


class DecentralizedLayout(PolicyLayout):
    """Two role actors (logistics, experience): candidate k of each is joint action k."""

    def role_actions(self, texts: Sequence[str]) -> tuple[str, str]:
        logistics, experience = texts
        return logistics, experience


class CentralizedLayout(PolicyLayout):
    """One joint actor writing every slot of both roles; its action splits into the two role actions."""

    kind = CENTRALIZED_JOINT
    name = "centralized"
    num_policies = 1
    joint = True

    @staticmethod
    def output_budget(role_tokens: int) -> int:
        return 2 * role_tokens  # the two role calls' budgets pooled (1,024 + 1,024 = 2,048 by default)

    def role_actions(self, texts: Sequence[str]) -> tuple[str, str]:
        (joint,) = texts
        return split_joint_action(joint)

    def policy_dir(self, policy: int) -> str:
        return "joint"


LAYOUTS: dict[str, type[PolicyLayout]] = {"decentralized": DecentralizedLayout, "centralized": CentralizedLayout}


def layout_class(name: str) -> type[PolicyLayout]:
    """The layout class of `actor.layout` (decentralized | centralized)."""
    if name not in LAYOUTS:
        raise ValueError(f"actor.layout={name!r}: choose one of {', '.join(LAYOUTS)}")
    return LAYOUTS[name]


def build_layout(
    model_factory: Callable[..., Any],
    hardware: HardwareConfig | Mapping[str, Any],
    generation: GenerationConfig | Mapping[str, Any],
    *,
    learning_rate: float,
    seed: int,
    layout: str = "decentralized",
) -> "PolicyLayout":
    """Validate devices, then load the layout's policies (travel/agents/layouts.py), each with its model,
    AdamW optimizer, decoder and sampling RNG: a decentralized layout has one actor per role on
    `hardware.agent_devices`; a centralized one has one joint actor on the first of them, whose output budget
    is the sum of the role budgets (generation.max_new_tokens per role). `hardware` and `generation` are the typed
    option groups, or mappings of their options (the missing ones take the defaults)."""
    # deferred: the decoder's modules load when a layout is built, never for a dry run's layout_class
    from travel.generation import StructuredDecoder

    hardware, generation = HardwareConfig.from_mapping(hardware), GenerationConfig.from_mapping(generation)
    cls = layout_class(layout)
    devices = agent_devices(list(hardware.agent_devices), hardware.parallel_training)
    if learning_rate <= 0:
        raise ValueError(f"algorithm.learning_rate={learning_rate}: must be > 0")
    stash = HostStash() if any(device.type == "cuda" for device in devices) else None  # shared: one parks at a time
    actors = []
    for policy, device in enumerate(devices[: cls.num_policies]):
        loaded = model_factory(device=str(device), gradient_checkpointing=hardware.gradient_checkpointing)
        checkpoint_first_layers(loaded.model, hardware.checkpoint_layers)
        if hardware.compile_update:
            compile_update_layers(loaded.model)
        optimizer = torch.optim.AdamW(loaded.model.parameters(), lr=float(learning_rate))
        decoder = StructuredDecoder(
            loaded.model,
            loaded.tokenizer,
            max_new_tokens=cls.output_budget(generation.max_new_tokens),
            max_value_tokens=generation.max_value_tokens,
            temperature=generation.temperature,
            top_p=generation.top_p,
            values=generation.values,
            jump_forced=generation.jump_forced,
            compute_dtype=hardware.compute_dtype,
            decode_weights=hardware.decode_weights,
            compile_decode=hardware.compile_decode,
            compile_prefill=hardware.compile_prefill,
            decode_matmul=hardware.decode_matmul,
            step_backend=hardware.step_backend,
            share_prompt_cache=hardware.share_prompt_cache,
            prefix_attention=hardware.prefix_attention,
        )
        generator = torch.Generator(device=device).manual_seed(int(seed) + policy)
        actors.append(
            Actor(policy, loaded.model, loaded.tokenizer, optimizer, device, decoder, generator, stash, joint=cls.joint)
        )
    return cls(actors, parallel=hardware.per_device, offload_inactive=hardware.offload_inactive_actor)
