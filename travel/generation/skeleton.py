"""The forced token sequences of one role's action: schema suffixes, value closes and their budget.

For a role and trip length, `action_skeleton` gives the text before the first value (the assistant
prefill) and the schema text after each value. The decoder forces, after value k:

- a voluntary close (the policy sampled the closing `"`): suffix k;
- a forced close (value token cap or token budget): close(escape_state, has_content) + suffix k, where
  the close finishes a pending escape and the string: `"`, `n"`, `0000"`, `000"`, `00"`, `0"` when the
  value has visible content, and the same with `-` before the quote when it has none (so `-"` is
  the fallback of an empty value and no forced close leaves a blank value).

Each string is tokenized once without special tokens and must decode back exactly; every forced
sequence (close + suffix) and the whole all-`-` tail must decode to their concatenated text too.
Sequences are stored in a "bank": slot k's sequences have ids k * SEQUENCES_PER_SLOT + code, with
code 0 = suffix only, 1 + has_content * 6 + escape_state = that close + suffix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from travel.generation.value_vocab import ESCAPE_STATES
from travel.task.fields import action_slots
from travel.task.roles import action_skeleton

ESCAPE_CLOSE_BODIES: tuple[str, ...] = ("", "n", "0000", "000", "00", "0")  # indexed by escape state
SEQUENCES_PER_SLOT = 1 + 2 * ESCAPE_STATES


class SkeletonTokenizationError(ValueError):
    """A forced schema string does not survive tokenization (its ids do not decode back to it)."""


def close_text(escape_state: int, has_content: bool) -> str:
    body = ESCAPE_CLOSE_BODIES[escape_state]
    return body + ('"' if has_content else '-"')


def close_code(escape_state: int, has_content: bool) -> int:
    return 1 + int(has_content) * ESCAPE_STATES + escape_state


def _decode(tokenizer: Any, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


def encode_forced(tokenizer: Any, text: str) -> list[int]:
    """Token ids of a forced string, checked to decode back to exactly `text`."""
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    decoded = _decode(tokenizer, ids)
    if not ids or decoded != text:
        raise SkeletonTokenizationError(f"forced text {text!r} tokenizes to {ids} which decodes to {decoded!r}")
    return ids


@dataclass(frozen=True)
class SlotPlan:
    """Forced sequences and budget figures for one role's action over `days` days."""

    agent_id: int
    days: int
    prefix: str  # the assistant prefill: the action text up to inside the first value's quote
    suffixes: tuple[str, ...]
    sequences: tuple[tuple[int, ...], ...]  # the bank, SEQUENCES_PER_SLOT per slot
    tails: tuple[int, ...]  # tails[k]: tokens of suffix k plus `-"` + suffix for every later slot
    longest_close: int  # most tokens any close needs
    minimum_tokens: int  # the all-`-` action's generated length

    @property
    def num_slots(self) -> int:
        return len(self.suffixes)

    def sequence_id(self, slot: int, code: int) -> int:
        return slot * SEQUENCES_PER_SLOT + code


def build_slot_plan(tokenizer: Any, agent_id: int, days: int) -> SlotPlan:
    slots = action_slots(agent_id, days)
    prefix, suffixes = action_skeleton(agent_id, slots)
    closes = {
        (state, content): close_text(state, content) for content in (False, True) for state in range(ESCAPE_STATES)
    }
    close_ids = {key: encode_forced(tokenizer, text) for key, text in closes.items()}
    suffix_ids = [encode_forced(tokenizer, suffix) for suffix in suffixes]
    sequences: list[tuple[int, ...]] = []
    for suffix, ids in zip(suffixes, suffix_ids):
        sequences.append(tuple(ids))
        for content in (False, True):
            for state in range(ESCAPE_STATES):
                joined = close_ids[(state, content)] + ids
                expected = closes[(state, content)] + suffix
                if _decode(tokenizer, joined) != expected:
                    raise SkeletonTokenizationError(
                        f"close {closes[(state, content)]!r} followed by suffix {suffix!r} does not decode to their "
                        f"concatenation: the tokenizer is not compositional on the action schema"
                    )
                sequences.append(tuple(joined))
    fallback = close_ids[(0, False)]
    all_dash = [token for ids in suffix_ids for token in fallback + ids]
    expected_dash = "".join('-"' + suffix for suffix in suffixes)
    if _decode(tokenizer, all_dash) != expected_dash:
        raise SkeletonTokenizationError(
            f"the all-'-' action tail does not decode to {expected_dash!r}: the tokenizer is not compositional"
        )
    tails = []
    for slot in range(len(suffixes)):
        later = sum(len(fallback) + len(ids) for ids in suffix_ids[slot + 1 :])
        tails.append(len(suffix_ids[slot]) + later)
    return SlotPlan(
        agent_id=agent_id,
        days=days,
        prefix=prefix,
        suffixes=tuple(suffixes),
        sequences=tuple(sequences),
        tails=tuple(tails),
        longest_close=max(len(ids) for ids in close_ids.values()),
        minimum_tokens=len(all_dash),
    )


@dataclass(frozen=True)
class ForcedSequenceBank:
    """The forced sequences and budget tails of the distinct plans of one decode call, as device tensors.

    Request i's slot k, code c is row sequence_base[i] + k * SEQUENCES_PER_SLOT + c of `tokens` (padded);
    its budget tail is tails[tail_base[i] + k].
    """

    tokens: torch.Tensor  # (sequences, width) long
    lengths: torch.Tensor  # (sequences,) long
    tails: torch.Tensor  # (total slots,) long
    sequence_base: torch.Tensor  # (requests,) long
    tail_base: torch.Tensor  # (requests,) long
    num_slots: torch.Tensor  # (requests,) long
    longest_close: int

    @classmethod
    def of(cls, plans: Sequence[SlotPlan], pad_token_id: int, device: torch.device) -> ForcedSequenceBank:
        offsets: dict[tuple[int, int], tuple[int, int]] = {}
        sequences: list[tuple[int, ...]] = []
        tails: list[int] = []
        for plan in plans:
            if (plan.agent_id, plan.days) not in offsets:
                offsets[(plan.agent_id, plan.days)] = (len(sequences), len(tails))
                sequences.extend(plan.sequences)
                tails.extend(plan.tails)
        tokens = torch.full((len(sequences), max(len(s) for s in sequences)), pad_token_id, dtype=torch.long)
        for index, sequence in enumerate(sequences):
            tokens[index, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)

        def longs(values: Sequence[int]) -> torch.Tensor:
            return torch.tensor(list(values), dtype=torch.long, device=device)

        bases = [offsets[(plan.agent_id, plan.days)] for plan in plans]
        return cls(
            tokens=tokens.to(device),
            lengths=longs([len(s) for s in sequences]),
            tails=longs(tails),
            sequence_base=longs([base for base, _ in bases]),
            tail_base=longs([base for _, base in bases]),
            num_slots=longs([plan.num_slots for plan in plans]),
            longest_close=max(plan.longest_close for plan in plans),
        )
