"""What the decoder takes and returns: decode requests (a role's prompt for a row, rendered through the
model's chat template and tokenized) and the candidate actions decoded for them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from travel.generation.chat import render_role_prompt
from travel.task.prompts import build_role_prompt

if TYPE_CHECKING:
    from travel.data.row import TravelRow


@dataclass(frozen=True)
class DecodeRequest:
    prompt: str  # the rendered chat prompt, ending with the role's assistant prefill
    agent_id: int
    days: int
    prompt_ids: tuple[int, ...] | None = None  # the prompt's tokens when already tokenized


@dataclass
class Candidate:
    text: str  # prefill + decoded generated tokens
    token_ids: torch.Tensor  # (n,) long, generated tokens only
    value_mask: torch.Tensor  # (n,) bool, 1 = sampled value token
    logprob: float | None  # mean full-vocabulary log-prob over value tokens (None unless requested)
    prompt_ids: torch.Tensor  # (p,) long, the tokenized prompt (shared by a request's candidates)


def as_request(request: DecodeRequest | Sequence[Any]) -> DecodeRequest:
    if isinstance(request, DecodeRequest):
        return request
    prompt, agent_id, days = request
    return DecodeRequest(str(prompt), int(agent_id), int(days))


def role_request(tokenizer: Any, row: TravelRow, agent_id: int, system_prompt: str | None = None) -> DecodeRequest:
    """The request of `agent_id` for `row`: chat-rendered prompt ending with the assistant prefill, tokenized once."""
    prompt = render_role_prompt(tokenizer, build_role_prompt(row, agent_id, system_prompt=system_prompt))
    ids = tuple(tokenizer.encode(prompt, add_special_tokens=False))
    return DecodeRequest(prompt=prompt, agent_id=agent_id, days=row.days, prompt_ids=ids)
