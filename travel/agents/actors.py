"""Actors: one model, tokenizer, AdamW optimizer and structured decoder per trainable policy.

The policy layout (travel/agents/layouts.py) builds the actors (`build_layout`), owns them and decides how
they are updated and placed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import torch

from travel.agents.devices import move_actor
from travel.agents.parking import HostStash, ParkedActor, park, unpark
from travel.generation import joint_request, role_request
from travel.io import versioned_directory

if TYPE_CHECKING:
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

    @torch.no_grad()
    def sample_streams(self, row: "TravelRow", streams: Sequence[tuple[int, torch.Generator]]) -> list[Any]:
        """One decoder call for `row` whose candidates split among random streams ((count, generator) pairs, such
        as this actor's own generator beside a current_copy comparator's): each stream's candidates are those a
        call with it alone would give, over one prompt fill."""
        self.model.eval()
        (candidates,) = self.decoder.generate(
            [self.request(row)], sum(count for count, _ in streams), return_logprobs=True, streams=streams
        )
        return list(candidates)

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

        directory = Path(directory)
        with versioned_directory(directory) as version:
            self.model.save_pretrained(version)
            self.tokenizer.save_pretrained(version)
        return directory
