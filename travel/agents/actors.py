"""Actors: one model, tokenizer, AdamW optimizer and structured decoder per trainable policy, and their loading.

`build_layout` validates `hardware.agent_devices` before it calls the model factory, so a device that
does not exist fails before any weights load. The policy layout (travel/agents/layouts.py) owns the
actors and how they are updated and placed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import torch

from travel.agents.compiled_layers import compile_update_layers
from travel.agents.devices import agent_devices, move_actor
from travel.agents.hardware import HardwareConfig
from travel.agents.models import checkpoint_first_layers
from travel.agents.parking import HostStash, ParkedActor, park, unpark
from travel.generation.config import GenerationConfig

if TYPE_CHECKING:
    from travel.agents.layouts import PolicyLayout
    from travel.data.row import TravelRow



class Actor:
    """One trainable policy: a role's, or the joint actor's; samples structured actions for rows (prompts
    rendered once per row)."""

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
        *,
        joint: bool = False,
    ):
        self.agent_id = agent_id  # the policy's index in its layout: the role, or 0 for the joint actor
        self.joint = joint  # writes the joint action of both roles (travel/task/joint_action.py)
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
            from travel.generation import joint_request, role_request

            values = getattr(self.decoder, "values", "free")
            if self.joint:
                request = joint_request(self.tokenizer, row, values=values)
            else:
                request = role_request(self.tokenizer, row, self.agent_id, values=values)
            cached = self._requests[id(row)] = (row, request)
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

    def load(self, directory: str | Path) -> None:
        """Weights saved by `save` (every *.safetensors file of `directory`); only tied weights may be absent."""
        from safetensors.torch import load_file

        directory = Path(directory)
        files = sorted(directory.glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"{directory}: no saved weights (*.safetensors) for policy {self.agent_id}")
        state: dict[str, Any] = {}
        for path in files:
            state.update(load_file(str(path), device=str(self.device)))
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        tied = set(getattr(self.model, "_tied_weights_keys", None) or ())
        if unexpected or set(missing) - tied:
            raise ValueError(
                f"{directory}: the saved weights do not fit policy {self.agent_id}'s model "
                f"(missing {sorted(set(missing) - tied)[:3]}, unexpected {sorted(unexpected)[:3]})"
            )

    def save(self, directory: str | Path) -> Path:
        """Weights and tokenizer; `directory` is replaced only once both are complete (travel.io.versioned_directory)."""
        from travel.io import versioned_directory

        directory = Path(directory)
        with versioned_directory(directory) as version:
            self.model.save_pretrained(version)
            self.tokenizer.save_pretrained(version)
        return directory


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
    from travel.agents.layouts import layout_class

    hardware, generation = HardwareConfig.from_mapping(hardware), GenerationConfig.from_mapping(generation)
    cls = layout_class(layout)
    devices = agent_devices(list(hardware.agent_devices), hardware.parallel_training)
    if learning_rate <= 0:
        raise ValueError(f"algorithm.learning_rate={learning_rate}: must be > 0")
    from travel.generation import StructuredDecoder

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
        )
        generator = torch.Generator(device=device).manual_seed(int(seed) + policy)
        actors.append(
            Actor(policy, loaded.model, loaded.tokenizer, optimizer, device, decoder, generator, stash, joint=cls.joint)
        )
    return cls(actors, parallel=hardware.per_device, offload_inactive=hardware.offload_inactive_actor)
