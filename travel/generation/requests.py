"""What the decoder takes and returns: decode requests (a role's prompt for a row, rendered through the
model's chat template and tokenized) and the candidate actions decoded for them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from travel.generation.chat import render_role_prompt
from travel.task.fields import JOINT_ACTION
from travel.task.joint_prompt import build_joint_prompt
from travel.task.prompts import build_role_prompt
from travel.task.value_options import slot_value_options

if TYPE_CHECKING:
    from travel.data.row import TravelRow


@dataclass(frozen=True)
class DecodeRequest:
    prompt: str  # the rendered chat prompt, ending with the role's assistant prefill
    agent_id: int
    days: int
    prompt_ids: tuple[int, ...] | None = None  # the prompt's tokens when already tokenized
    slot_values: tuple[tuple[str, ...], ...] | None = None  # per slot, the values generation.values=catalog admits


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


def joint_request(tokenizer: Any, row: TravelRow, system_prompt: str | None = None, values: str = "free") -> DecodeRequest:
    """The joint policy's request for `row` (travel/task/joint_prompt.py): agent_id JOINT_ACTION, every slot."""

    return _request(tokenizer, row, build_joint_prompt(row, system_prompt=system_prompt), JOINT_ACTION, values)


def role_request(
    tokenizer: Any, row: TravelRow, agent_id: int, system_prompt: str | None = None, values: str = "free"
) -> DecodeRequest:
    """The request of `agent_id` for `row`: chat-rendered prompt ending with the assistant prefill, tokenized once.
    With `values="catalog"` it carries each slot's admitted values (travel/task/value_options.py)."""
    return _request(tokenizer, row, build_role_prompt(row, agent_id, system_prompt=system_prompt), agent_id, values)


def _request(tokenizer: Any, row: TravelRow, role_prompt: Any, agent_id: int, values: str) -> DecodeRequest:
    prompt = render_role_prompt(tokenizer, role_prompt)
    ids = tuple(tokenizer.encode(prompt, add_special_tokens=False))
    slot_values = slot_value_options(row, agent_id) if values == "catalog" else None
    return DecodeRequest(prompt=prompt, agent_id=agent_id, days=row.days, prompt_ids=ids, slot_values=slot_values)


def decoded_candidates(
    tokenizer: Any,
    prefixes: Sequence[str],
    prompt_ids: Sequence[torch.Tensor],
    k: int,
    tokens: torch.Tensor,
    masks: torch.Tensor,
    lengths: torch.Tensor,
    logprobs: torch.Tensor | None,
) -> list[list[Candidate]]:
    """The decoder's output rows (K per request, grouped by request) as candidates; a text is its request's
    prefill plus its decoded tokens."""
    results: list[list[Candidate]] = []
    for index, prefix in enumerate(prefixes):
        group = []
        for row in range(index * k, (index + 1) * k):
            length = int(lengths[row])
            ids = tokens[row, :length].clone()
            text = prefix + tokenizer.decode(ids.tolist(), skip_special_tokens=False, clean_up_tokenization_spaces=False)
            group.append(
                Candidate(
                    text=text,
                    token_ids=ids,
                    value_mask=masks[row, :length].clone(),
                    logprob=None if logprobs is None else float(logprobs[row]),
                    prompt_ids=prompt_ids[index],
                )
            )
        results.append(group)
    return results
