"""Actors: one model, tokenizer, AdamW optimizer and structured decoder per role, and their placement.

`build_actors` validates `hardware.agent_devices` before it calls the model factory, so a device that
does not exist fails before any weights load. `ActorGroup.update_each` runs one update per actor:
- hardware=1xb200 (`offload_inactive_actor`): both actors live on cuda:0 for generation; while one
  updates, the other and its optimizer state wait in reusable pinned host memory (`parking.py`), and
  come back even if the update fails;
- hardware=2gpu (`parallel_training=per_device`): one actor per device, updated in parallel threads;
- hardware=cpu: one after the other, no moves.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence, TypeVar

import torch

from travel.agents.devices import agent_devices, move_actor
from travel.agents.parking import HostStash, ParkedActor, park, unpark

if TYPE_CHECKING:
    from travel.data.row import TravelRow

T = TypeVar("T")
CPU = torch.device("cpu")


class Actor:
    """One role's policy: samples structured actions for rows (prompts rendered once per row)."""

    def __init__(
        self,
        agent_id: int,
        model: Any,
        tokenizer: Any,
        optimizer: torch.optim.Optimizer,
        device: torch.device,
        decoder: Any,
        generator: torch.Generator | None = None,
        stash: HostStash | None = None,
    ):
        self.agent_id = agent_id
        self.model = model
        self.tokenizer = tokenizer
        self.optimizer = optimizer
        self.device = device
        self.decoder = decoder
        self.generator = generator
        self.stash = stash  # where the actor waits when moved to the CPU; None: plain pageable moves
        self._parked: ParkedActor | None = None
        self._requests: dict[int, tuple["TravelRow", Any]] = {}

    def request(self, row: "TravelRow") -> Any:
        """The decoder request of this role for `row` (rendered once, then cached)."""
        cached = self._requests.get(id(row))
        if cached is None or cached[0] is not row:
            from travel.generation import role_request

            values = getattr(self.decoder, "values", "free")
            cached = self._requests[id(row)] = (row, role_request(self.tokenizer, row, self.agent_id, values=values))
        return cached[1]

    def prompt_ids(self, row: "TravelRow") -> Sequence[int]:
        return self.request(row).prompt_ids

    def sample(self, row: "TravelRow", num_candidates: int, *, greedy: bool = False) -> list[Any]:
        return self.sample_rows([row], num_candidates, greedy=greedy)[0]

    @torch.no_grad()
    def sample_rows(self, rows: Sequence["TravelRow"], num_candidates: int, *, greedy: bool = False) -> list[list[Any]]:
        """`num_candidates` actions per row from one decoder call (one prefill per row)."""
        self.model.eval()
        groups = self.decoder.generate(
            [self.request(row) for row in rows],
            num_candidates,
            greedy=greedy,
            return_logprobs=True,  # the training metrics' entropy estimate
            generator=None if greedy else self.generator,
        )
        return [list(group) for group in groups]

    def to(self, device: torch.device | str) -> None:
        """Move model and optimizer state; a GPU actor sent to the CPU is parked in the stash when it has one."""
        device = torch.device(device)
        if self._parked is not None:
            parked, self._parked = self._parked, None
            unpark(parked, self.stash)
            if device == parked.device:
                return
        if device.type == "cpu" and self.stash is not None and self.device.type != "cpu":
            self._parked = park(self.model, self.optimizer, self.stash)
            return
        move_actor(self.model, self.optimizer, device)

    def save(self, directory: str | Path) -> Path:
        """Weights and tokenizer; `directory` is replaced only once both are complete (travel.io.versioned_directory)."""
        from travel.io import versioned_directory

        directory = Path(directory)
        with versioned_directory(directory) as version:
            self.model.save_pretrained(version)
            self.tokenizer.save_pretrained(version)
        return directory


class ActorGroup:
    def __init__(self, actors: Sequence[Actor], *, parallel: bool = False, offload_inactive: bool = False):
        self.actors = tuple(actors)
        self.parallel = parallel
        self.offload_inactive = offload_inactive and not parallel
        self._workers = [ThreadPoolExecutor(max_workers=1) for _ in self.actors] if parallel else None

    def __iter__(self) -> Iterator[Actor]:
        return iter(self.actors)

    def __getitem__(self, agent_id: int) -> Actor:
        return self.actors[agent_id]

    def only_active(self, active: Actor) -> contextlib.AbstractContextManager[None]:
        """Move every other GPU actor (model and optimizer state) to the CPU when offloading is on, and back."""
        return _parked([a for a in self.actors if a is not active and self.offload_inactive])

    def all_on_cpu(self) -> contextlib.AbstractContextManager[None]:
        """Every actor waits on the CPU (e.g. while a reward model fits), and comes back even if the body fails."""
        return _parked(self.actors)

    def update_each(self, step: Callable[[Actor], T]) -> list[T]:
        """`step(actor)` for every actor, in agent order of the results."""
        if self._workers is not None:
            futures = [worker.submit(_in_compute_dtype, step, actor) for worker, actor in zip(self._workers, self.actors)]
            return [future.result() for future in futures]
        results = []
        for actor in self.actors:
            with self.only_active(actor):
                results.append(_in_compute_dtype(step, actor))
        return results

    def save(self, directory: str | Path) -> list[Path]:
        return [actor.save(Path(directory) / f"agent_{actor.agent_id}") for actor in self.actors]

    def close(self) -> None:
        for worker in self._workers or ():
            worker.shutdown(wait=True)
        self._workers = None


def build_actors(
    model_factory: Callable[..., Any],
    hardware: Mapping[str, Any],
    generation: Mapping[str, Any],
    *,
    learning_rate: float,
    seed: int,
) -> ActorGroup:
    """Validate devices, then load one model per role with its optimizer, decoder and sampling RNG."""
    devices = agent_devices(list(hardware["agent_devices"]), str(hardware.get("parallel_training", "none")))
    if learning_rate <= 0:
        raise ValueError(f"algorithm.learning_rate={learning_rate}: must be > 0")
    from travel.generation import StructuredDecoder

    compute_dtype = hardware.get("compute_dtype")
    stash = HostStash() if any(device.type == "cuda" for device in devices) else None  # shared: one parks at a time
    actors = []
    for agent_id, device in enumerate(devices):
        loaded = model_factory(device=str(device), gradient_checkpointing=bool(hardware.get("gradient_checkpointing", False)))
        optimizer = torch.optim.AdamW(loaded.model.parameters(), lr=float(learning_rate))
        decoder = StructuredDecoder(
            loaded.model,
            loaded.tokenizer,
            max_new_tokens=int(generation["max_new_tokens"]),
            max_value_tokens=int(generation["max_value_tokens"]),
            temperature=float(generation["temperature"]),
            top_p=float(generation["top_p"]),
            values=str(generation.get("values", "free")),
            compute_dtype=compute_dtype,
        )
        generator = torch.Generator(device=device).manual_seed(int(seed) + agent_id)
        actors.append(Actor(agent_id, loaded.model, loaded.tokenizer, optimizer, device, decoder, generator, stash))
    return ActorGroup(
        actors,
        parallel=str(hardware.get("parallel_training", "none")) == "per_device",
        offload_inactive=bool(hardware.get("offload_inactive_actor", False)),
    )


def _in_compute_dtype(step: Callable[[Actor], T], actor: Actor) -> T:
    """`step(actor)` under the autocast its decoder decodes with (hardware.compute_dtype)."""
    from travel.generation.model_io import compute_autocast

    compute_dtype = getattr(getattr(actor, "decoder", None), "compute_dtype", None)
    if compute_dtype is None:
        return step(actor)
    with compute_autocast(actor.device, compute_dtype):
        return step(actor)


@contextlib.contextmanager
def _parked(actors: list[Actor]) -> Iterator[None]:
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
