"""The structured decoder's loop: per-row state in device tensors, one forward per iteration for all rows.

Per row the state is the slot, the mode (VALUE, FORCED, DONE), the JSON-string escape state, whether the value
has content, its token count, the generated count, and the pending forced sequence with a pointer into it.

- VALUE mode: the policy samples among the value-admissible tokens. Before sampling, the value is closed by
  force when it reached its token cap, or when the remaining budget could no longer pay for one more token,
  the longest close and `-"` + suffix for every later slot; so `max_new_tokens` is never exceeded.
- FORCED mode: the next token of the pending forced sequence (close and/or schema suffix).
- DONE: the row emits padding that is not part of its output.

One token per row and iteration (`jump=False`), or with `jump=True` a row emits a whole forced run in one
iteration: a forced row the rest of its sequence, a value row that samples its closing quote that token and
the slot's suffix after it. The forward of a jump iteration then takes up to `jump_width` tokens per row
(travel/generation/jump_step.py). Every decision is taken at the same point of a row's output either way,
and seeded draws are keyed by the row's generated-token count, so both modes give the same tokens.
"""

from __future__ import annotations

from typing import Any

import torch

from travel.generation.sampling import ensure_legal, greedy_choice, sample_choice, seeded_uniforms
from travel.generation.skeleton import SEQUENCES_PER_SLOT, ForcedSequenceBank
from travel.generation.value_vocab import ESCAPE_STATES, value_tables

VALUE, FORCED, DONE = 0, 1, 2
DONE_CHECK_INTERVAL = 8  # iterations between checks whether every row finished (each check waits for the GPU)


def jump_width(plans: list[Any]) -> int:
    """Tokens a jump iteration feeds per row: a value token plus the longest forced sequence of the plans."""
    return 1 + max(len(sequence) for plan in plans for sequence in plan.sequences)


def decode_loop(
    decoder: Any,
    plans: list[Any],
    logits: torch.Tensor,
    k: int,
    greedy: bool,
    return_logprobs: bool,
    generator: torch.Generator | None,
    row_seeds: torch.Tensor | None,
    device: torch.device,
    forward_step: Any,
    slot_values: list[tuple[tuple[str, ...], ...]] | None = None,
    jump: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, int]:
    """(tokens, value masks, generated lengths, mean value log-probs or None) of every row, on the CPU, and the
    number of decode steps (forwards after the prefill) the loop ran.

    `forward_step(token (rows,), iteration)` (one token per row) or, with `jump`, `forward_step(tokens (rows, W),
    counts (rows,), generated (rows,))` returns the next (rows, vocab) logits; `decoder` gives the settings."""
    rows, vocab = logits.shape
    host_tables = value_tables(decoder.tokenizer, vocab)
    tables = host_tables.on(device)
    catalog = None if slot_values is None else decoder._tries.tables(slot_values, k, host_tables, device)
    bank = ForcedSequenceBank.of(plans, decoder.pad_token_id, device)
    seq_base = bank.sequence_base.repeat_interleave(k)
    tail_base = bank.tail_base.repeat_interleave(k)
    num_slots = bank.num_slots.repeat_interleave(k)
    reserve = 1 + bank.longest_close
    budget = decoder.max_new_tokens
    # a catalog value is as long as its trie path: no token cap
    value_cap = budget + 1 if decoder.fill_budget or catalog is not None else decoder.max_value_tokens
    width = jump_width(plans) if jump else 1
    offsets = torch.arange(width, device=device)

    def zeros(dtype: torch.dtype = torch.long) -> torch.Tensor:
        return torch.zeros(rows, dtype=dtype, device=device)

    slot, mode, escape, seq, pos, value_count, generated = (zeros() for _ in range(7))
    has_content = zeros(torch.bool)
    logprob_sum = torch.zeros(rows, dtype=torch.float32, device=device)
    # `width` spare columns: a jump iteration's padding positions land there, never in a row's output
    out_tokens = torch.full((rows, budget + width), decoder.pad_token_id, dtype=torch.long, device=device)
    out_mask = torch.zeros((rows, budget + width), dtype=torch.bool, device=device)
    spare = torch.full((rows, width), budget + width - 1, dtype=torch.long, device=device)
    pad = torch.full((rows,), decoder.pad_token_id, dtype=torch.long, device=device)
    node = None if catalog is None else catalog.root(slot)

    steps = 0
    for step in range(budget):
        # Close values that hit the token cap or can no longer afford another token.
        in_value = mode == VALUE
        tail = bank.tails[tail_base + slot]
        must_close = in_value & ((value_count >= value_cap) | (budget - generated < reserve + tail))
        code = 1 + has_content.long() * ESCAPE_STATES + escape
        seq = torch.where(must_close, seq_base + slot * SEQUENCES_PER_SLOT + code, seq)
        pos = torch.where(must_close, torch.zeros_like(pos), pos)
        mode = torch.where(must_close, torch.full_like(mode, FORCED), mode)
        in_value, in_forced, active = mode == VALUE, mode == FORCED, mode != DONE

        legal = tables.admissible[escape * 2 + has_content.long()]
        if decoder.fill_budget:
            legal = legal & ~tables.closes[escape]
        if catalog is not None:
            legal = torch.where(in_value[:, None], catalog.legal(node), legal)
        if greedy:
            chosen = greedy_choice(logits, legal)
        else:
            uniforms = None if row_seeds is None else seeded_uniforms(row_seeds, generated, vocab)
            chosen = sample_choice(logits, legal, decoder.temperature, decoder.top_p, generator, uniforms)
        chosen = ensure_legal(chosen, legal)
        forced_token = bank.tokens[seq, pos]
        token = torch.where(in_value, chosen, torch.where(in_forced, forced_token, pad))
        if return_logprobs:
            token_logprob = torch.log_softmax(logits, dim=-1).gather(1, token[:, None]).squeeze(1)
            logprob_sum += torch.where(in_value, token_logprob, torch.zeros_like(token_logprob))

        # Value rows: advance the string state; a closing quote schedules the slot's suffix.
        closes = in_value & tables.closes[escape, token]
        has_content = has_content | (in_value & tables.adds_content[escape, token])
        escape = torch.where(in_value, tables.next_state[escape, token], escape)
        value_count = value_count + in_value.long()
        suffix = seq_base + slot * SEQUENCES_PER_SLOT
        if jump:
            # This iteration emits a forced row's whole remaining sequence, and after a closing quote the suffix.
            run_seq = torch.where(closes, suffix, seq)
            start = torch.where(closes, torch.zeros_like(pos), pos)
            runs = in_forced | closes
            lead = (~in_forced).long()  # the row's own token first: value rows (and DONE rows' padding)
            counts = lead + torch.where(runs, bank.lengths[run_seq] - start, torch.zeros_like(start))
            index = (start[:, None] + offsets[None, :] - lead[:, None]).clamp(0, bank.tokens.shape[1] - 1)
            chunk = bank.tokens[run_seq[:, None], index]
            chunk = torch.where((offsets[None, :] == 0) & (lead[:, None] == 1), token[:, None], chunk)
            finished = runs
            pos = torch.zeros_like(pos)
        else:
            # Forced rows: advance the pointer; a finished sequence opens the next slot or ends the row.
            pos = pos + in_forced.long()
            finished = in_forced & (pos >= bank.lengths[seq])
        last = slot + 1 >= num_slots
        next_slot = finished & ~last
        if not jump:
            mode = torch.where(closes, torch.full_like(mode, FORCED), mode)
        mode = torch.where(finished & last, torch.full_like(mode, DONE), mode)
        mode = torch.where(next_slot, torch.full_like(mode, VALUE), mode)
        if not jump:
            seq = torch.where(closes, suffix, seq)
            pos = torch.where(closes, torch.zeros_like(pos), pos)
        slot = slot + next_slot.long()
        escape = torch.where(next_slot, torch.zeros_like(escape), escape)
        has_content = has_content & ~next_slot
        value_count = torch.where(next_slot, torch.zeros_like(value_count), value_count)
        if catalog is not None:
            node = torch.where(in_value & ~closes, catalog.advance(node, token), node)
            node = torch.where(next_slot, catalog.root(slot), node)

        if jump:
            written = (offsets[None, :] < counts[:, None]) & active[:, None]
            columns = torch.where(written, generated[:, None] + offsets[None, :], spare)
            out_tokens.scatter_(1, columns, chunk)
            out_mask.scatter_(1, columns, (offsets[None, :] == 0) & in_value[:, None])
            before = generated
            generated = generated + torch.where(active, counts, torch.zeros_like(counts))
        else:
            out_tokens[:, step] = token
            out_mask[:, step] = in_value
            generated = generated + active.long()
        if step + 1 == budget:
            break
        # Finished rows only emit padding, so checking every few iterations changes no output and spares
        # the GPU from waiting on the CPU after every iteration.
        if not decoder.fill_budget and (step + 1) % DONE_CHECK_INTERVAL == 0 and not bool((mode != DONE).any()):
            break
        logits = forward_step(chunk, counts, before) if jump else forward_step(token, step)
        steps += 1
    if bool((mode != DONE).any()):  # unreachable by the budget rule; kept as a loud guard
        raise RuntimeError("structured decoding ended with an unfinished action")
    logprobs = None
    if return_logprobs:
        counts = out_mask.sum(dim=1)
        logprobs = torch.where(counts > 0, logprob_sum / counts.clamp(min=1), torch.zeros_like(logprob_sum))
    tokens, masks = out_tokens[:, :budget], out_mask[:, :budget]
    return tokens.cpu(), masks.cpu(), generated.cpu(), None if logprobs is None else logprobs.cpu(), steps
