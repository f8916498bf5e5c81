"""One iteration of the structured decoder's loop as two pure functions of device tensors: `select` and `advance`.

A row's state (`RowState`) is its slot, its mode (VALUE, FORCED, DONE), the JSON-string escape state, whether
the value has content, its token count, the generated count, the pending forced sequence with a pointer into
it, the sum of its value log-probs and, with catalog values, its trie node. `CallTables` holds what stays fixed
for a decode call and `LoopSettings` its Python constants.

- `select` closes by force the values that reached their token cap or can no longer afford one more token,
  builds the legal-token mask, and draws the policy's choice: the greedy argmax, a seeded draw, or (with a
  torch.Generator) the nucleus probabilities that the loop draws from with `torch.multinomial`.
- `advance` takes the drawn token (or the forced one), its log-prob and the new state, and says what the
  iteration emits.

Being pure, both run through torch.compile unchanged (`hardware.compile_decode`), which fuses the iteration's
~130 small kernels (hashing the seeded uniforms over the vocabulary alone is about 30) into a few. The loop
itself (travel/generation/decode_loop.py) writes the output and runs the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from travel.generation.sampling import ensure_legal, greedy_choice, gumbel_choice, nucleus_scores, seeded_uniforms
from travel.generation.skeleton import SEQUENCES_PER_SLOT
from travel.generation.value_vocab import ESCAPE_STATES

VALUE, FORCED, DONE = 0, 1, 2
DRAWS = ("greedy", "seeds", "generator")


class RowState(NamedTuple):
    slot: torch.Tensor
    mode: torch.Tensor
    escape: torch.Tensor
    has_content: torch.Tensor  # bool
    value_count: torch.Tensor
    generated: torch.Tensor
    seq: torch.Tensor  # the pending forced sequence, and `pos` the next token's index in it
    pos: torch.Tensor
    logprob_sum: torch.Tensor  # float32, over value tokens
    node: torch.Tensor | None  # catalog values: the trie node


class CallTables(NamedTuple):
    admissible: torch.Tensor  # value_vocab.ValueTables, on the device
    closes: torch.Tensor
    adds_content: torch.Tensor
    next_state: torch.Tensor
    forced_tokens: torch.Tensor  # skeleton.ForcedSequenceBank, per row where it is per request
    forced_lengths: torch.Tensor
    tails: torch.Tensor
    seq_base: torch.Tensor
    tail_base: torch.Tensor
    num_slots: torch.Tensor
    offsets: torch.Tensor  # arange(jump width)
    token_keys: torch.Tensor  # sampling.token_keys(vocab)
    reserve: torch.Tensor  # 0-d: a closing quote plus the longest close (a tensor: no recompile per role)
    catalog: Any  # value_trie.CatalogTables or None
    nucleus_bins: torch.Tensor | None  # sampling.nucleus_bins of the logits' 16-bit dtype, or None: top-p sorts


@dataclass(frozen=True)
class LoopSettings:
    budget: int  # max_new_tokens
    value_cap: int  # tokens of one value
    fill_budget: bool
    draw: str  # one of DRAWS
    temperature: float
    top_p: float
    return_logprobs: bool
    jump: bool
    pad_token_id: int


class Emitted(NamedTuple):
    """What an iteration writes: one token per row, or with jumps up to the jump width per row."""

    tokens: torch.Tensor  # (rows,) or (rows, W)
    value_mask: torch.Tensor  # like tokens: sampled value tokens
    columns: torch.Tensor | None  # jumps: the output columns of `tokens` (spare columns for the unwritten ones)
    counts: torch.Tensor | None  # jumps: tokens fed per row
    before: torch.Tensor | None  # jumps: the generated count before this iteration


def initial_state(rows: int, device: torch.device, catalog: Any) -> RowState:
    def zeros(dtype: torch.dtype = torch.long) -> torch.Tensor:
        return torch.zeros(rows, dtype=dtype, device=device)

    slot = zeros()
    return RowState(
        slot=slot, mode=zeros(), escape=zeros(), has_content=zeros(torch.bool), value_count=zeros(), generated=zeros(),
        seq=zeros(), pos=zeros(), logprob_sum=zeros(torch.float32), node=None if catalog is None else catalog.root(slot),
    )


def select(
    state: RowState, tables: CallTables, settings: LoopSettings, logits: torch.Tensor, row_seeds: torch.Tensor | None
) -> tuple[RowState, torch.Tensor, torch.Tensor]:
    """(state with the forced closes applied, (rows, vocab) legal mask, draw): the draw is the chosen (rows,) tokens,
    or for `draw="generator"` the (rows, vocab) probabilities to sample them from."""
    in_value = state.mode == VALUE
    tail = tables.tails[tables.tail_base + state.slot]
    budget_left = settings.budget - state.generated
    must_close = in_value & ((state.value_count >= settings.value_cap) | (budget_left < tables.reserve + tail))
    code = 1 + state.has_content.long() * ESCAPE_STATES + state.escape
    seq = torch.where(must_close, tables.seq_base + state.slot * SEQUENCES_PER_SLOT + code, state.seq)
    pos = torch.where(must_close, torch.zeros_like(state.pos), state.pos)
    mode = torch.where(must_close, torch.full_like(state.mode, FORCED), state.mode)
    state = RowState(  # not NamedTuple._replace: compiled by torch 2.11 at one row, it returned a broken tuple
        state.slot, mode, state.escape, state.has_content, state.value_count, state.generated, seq, pos,
        state.logprob_sum, state.node,
    )

    legal = tables.admissible[state.escape * 2 + state.has_content.long()]
    if settings.fill_budget:
        legal = legal & ~tables.closes[state.escape]
    if tables.catalog is not None:
        legal = torch.where((mode == VALUE)[:, None], tables.catalog.legal(state.node), legal)
    if settings.draw == "greedy":
        return state, legal, greedy_choice(logits, legal)
    scores = nucleus_scores(logits, legal, settings.temperature, settings.top_p, tables.nucleus_bins)
    if settings.draw == "generator":
        return state, legal, scores.softmax(dim=-1)
    uniforms = seeded_uniforms(row_seeds, state.generated, logits.shape[1], tables.token_keys)
    return state, legal, gumbel_choice(scores, uniforms)


def advance(
    state: RowState,
    tables: CallTables,
    settings: LoopSettings,
    logits: torch.Tensor,
    chosen: torch.Tensor,
    legal: torch.Tensor,
) -> tuple[RowState, Emitted]:
    """The state after the iteration that emits `chosen` in value rows (their forced token or padding elsewhere).

    Value rows advance their string state, and a closing quote schedules the slot's suffix. Forced rows advance
    their pointer; a finished sequence opens the next slot or ends the row. With `settings.jump` a forced row
    emits its whole remaining sequence, and a closing value row its quote and the suffix after it."""
    mode, escape, seq, pos, slot = state.mode, state.escape, state.seq, state.pos, state.slot
    in_value, in_forced, active = mode == VALUE, mode == FORCED, mode != DONE
    chosen = ensure_legal(chosen, legal)
    forced_token = tables.forced_tokens[seq, pos]
    pad = torch.full_like(chosen, settings.pad_token_id)
    token = torch.where(in_value, chosen, torch.where(in_forced, forced_token, pad))
    logprob_sum = state.logprob_sum
    if settings.return_logprobs:
        token_logprob = torch.log_softmax(logits, dim=-1).gather(1, token[:, None]).squeeze(1)
        logprob_sum = logprob_sum + torch.where(in_value, token_logprob, torch.zeros_like(token_logprob))

    closes = in_value & tables.closes[escape, token]
    has_content = state.has_content | (in_value & tables.adds_content[escape, token])
    escape = torch.where(in_value, tables.next_state[escape, token], escape)
    value_count = state.value_count + in_value.long()
    suffix = tables.seq_base + slot * SEQUENCES_PER_SLOT
    offsets = tables.offsets
    if settings.jump:
        run_seq = torch.where(closes, suffix, seq)
        start = torch.where(closes, torch.zeros_like(pos), pos)
        runs = in_forced | closes
        lead = (~in_forced).long()  # the row's own token first: value rows (and DONE rows' padding)
        counts = lead + torch.where(runs, tables.forced_lengths[run_seq] - start, torch.zeros_like(start))
        index = (start[:, None] + offsets[None, :] - lead[:, None]).clamp(0, tables.forced_tokens.shape[1] - 1)
        chunk = tables.forced_tokens[run_seq[:, None], index]
        chunk = torch.where((offsets[None, :] == 0) & (lead[:, None] == 1), token[:, None], chunk)
        finished = runs
        pos = torch.zeros_like(pos)
    else:
        pos = pos + in_forced.long()
        finished = in_forced & (pos >= tables.forced_lengths[seq])
    last = slot + 1 >= tables.num_slots
    next_slot = finished & ~last
    if not settings.jump:
        mode = torch.where(closes, torch.full_like(mode, FORCED), mode)
    mode = torch.where(finished & last, torch.full_like(mode, DONE), mode)
    mode = torch.where(next_slot, torch.full_like(mode, VALUE), mode)
    if not settings.jump:
        seq = torch.where(closes, suffix, seq)
        pos = torch.where(closes, torch.zeros_like(pos), pos)
    slot = slot + next_slot.long()
    escape = torch.where(next_slot, torch.zeros_like(escape), escape)
    has_content = has_content & ~next_slot
    value_count = torch.where(next_slot, torch.zeros_like(value_count), value_count)
    node = state.node
    if tables.catalog is not None:
        node = torch.where(in_value & ~closes, tables.catalog.advance(node, token), node)
        node = torch.where(next_slot, tables.catalog.root(slot), node)

    generated = state.generated
    if settings.jump:
        written = (offsets[None, :] < counts[:, None]) & active[:, None]
        spare = settings.budget + offsets.shape[0] - 1  # the last of the output's spare columns
        columns = torch.where(written, generated[:, None] + offsets[None, :], torch.full_like(chunk, spare))
        value_mask = (offsets[None, :] == 0) & in_value[:, None]
        emitted = Emitted(chunk, value_mask, columns, counts, generated)
        generated = generated + torch.where(active, counts, torch.zeros_like(counts))
    else:
        emitted = Emitted(token, in_value, None, None, None)
        generated = generated + active.long()
    state = RowState(slot, mode, escape, has_content, value_count, generated, seq, pos, logprob_sum, node)
    return state, emitted
