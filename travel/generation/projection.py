"""Encoding a role action written elsewhere (the central teacher's split joint action) as a continuation of
a role actor's own prompt: token ids and the value mask, without decoding.

The action must be the role's forced skeleton filled with values (travel/task/roles.format_action of its owned
slots in canonical order). Its prefix is already the end of the actor's prompt (the assistant prefill); what
follows is, per slot, the value's JSON string body with its closing quote (value tokens, mask 1: the teacher
chose them, whether it wrote "-" or a name) and the slot's schema suffix (the decoder's own forced tokens,
mask 0). The ids decode back to exactly the action text after the prefix, or the encoding fails.
"""

from __future__ import annotations

import json
from typing import Any

import torch

from travel.generation.skeleton import SEQUENCES_PER_SLOT


class ProjectionError(ValueError):
    """A role action that is not the role's filled skeleton; the message names the role and the problem."""


def encode_role_action(decoder: Any, agent_id: int, days: int, text: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(token ids, 0/1 value mask) of `text` after the role's assistant prefill, under `decoder`'s tokenizer."""
    plan = decoder.plan(agent_id, days)
    if not text.startswith(plan.prefix):
        raise ProjectionError(f"agent {agent_id}: the action does not start with the role's assistant prefill")
    try:
        values = [item["value"] for item in json.loads(text)["assignments"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ProjectionError(f"agent {agent_id}: the action is not the role's filled skeleton ({exc})") from None
    if len(values) != plan.num_slots or not all(isinstance(value, str) for value in values):
        raise ProjectionError(f"agent {agent_id}: {len(values)} values for the role's {plan.num_slots} slots")
    ids: list[int] = []
    mask: list[int] = []
    for slot, value in enumerate(values):
        body = json.dumps(value, ensure_ascii=False)[1:]  # the escaped value and its closing quote
        value_ids = list(decoder.tokenizer.encode(body, add_special_tokens=False))
        suffix = plan.sequences[slot * SEQUENCES_PER_SLOT]  # code 0: the slot's schema suffix alone
        ids += value_ids + list(suffix)
        mask += [1] * len(value_ids) + [0] * len(suffix)
    decoded = decoder.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    if decoded != text[len(plan.prefix) :]:
        raise ProjectionError(f"agent {agent_id}: the encoded action decodes to {decoded[:80]!r}..., not the action text")
    return torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.bool)
