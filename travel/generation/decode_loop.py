"""The structured decoder's loop: per-row state in device tensors, one forward per iteration for all rows.

Each iteration `select`s the value rows' tokens and `advance`s every row (travel/generation/loop_step.py, which
also holds the per-row state):

- VALUE mode: the policy samples among the value-admissible tokens. Before sampling, the value is closed by
  force when it reached its token cap, or when the remaining budget could no longer pay for one more token,
  the longest close and `-"` + suffix for every later slot; so `max_new_tokens` is never exceeded.
- FORCED mode: the next token of the pending forced sequence (close and/or schema suffix).
- DONE: the row emits padding that is not part of its output.

One token per row and iteration (`jump=False`), or with `jump=True` a row emits a whole forced run in one
iteration: a forced row the rest of its sequence, a value row that samples its closing quote that token and
the slot's suffix after it. The forward of a jump iteration then takes up to `jump_width` tokens per row
(travel/generation/kernels/jump_step.py). Every decision is taken at the same point of a row's output either way,
and seeded draws are keyed by the row's generated-token count, so both modes give the same tokens.

A call's generator draws can split among random streams (`StreamDraws`), one generator per group of candidates,
each drawing what a call of its candidates alone would.

With `compiled` both functions run through torch.compile (`hardware.compile_decode`), which fuses their ~130 small
kernels per iteration into a few; `bench/decode_loop.py --compile-loop` times the loop alone both ways
(docs/performance.md).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from travel.generation.compiled_forward import CompiledForward
from travel.generation.loop_step import DONE, CallTables, LoopSettings, advance, initial_state, select
from travel.generation.sampling import nucleus_bins, token_keys
from travel.generation.skeleton import ForcedSequenceBank
from travel.generation.value_vocab import value_tables

DONE_CHECK_INTERVAL = 8  # iterations between checks whether every row finished (each check waits for the GPU)
# one graph per draw, jump, catalog and log-prob choice, and per call shape until the sizes turn dynamic
LOOP_GRAPHS = 64
COMPILED_SELECT = CompiledForward(select, purpose="the decode loop's token choice", recompile_limit=LOOP_GRAPHS)
COMPILED_ADVANCE = CompiledForward(advance, purpose="the decode loop's state update", recompile_limit=LOOP_GRAPHS)


class StreamDraws:
    """The generator draws of a call whose candidates split among random streams: candidates
    [offset, offset + count) of every request draw from one generator, in a multinomial over those rows alone, and
    stop drawing at the done check that finds them all finished. Each generator so draws exactly what a call of
    `count` candidates per request with it alone would: the same tokens, and the same state after."""

    def __init__(self, streams: Sequence[tuple[int, torch.Generator]], k: int, requests: int, device: torch.device):
        counts = [count for count, _ in streams]
        if not counts or any(not isinstance(c, int) or c < 1 for c in counts) or sum(counts) != k:
            raise ValueError(f"random streams of {counts} candidates: each at least 1, together the call's {k}")
        for _, generator in streams:
            if generator.device.type != device.type:
                raise ValueError(f"a stream's generator is on {generator.device} but the model is on {device}")
        self.generators = [generator for _, generator in streams]
        self._host_rows: list[torch.Tensor] = []
        offset = 0
        for count in counts:
            rows = [request * k + offset + j for request in range(requests) for j in range(count)]
            self._host_rows.append(torch.tensor(rows, dtype=torch.long))
            offset += count
        self.rows = [rows.to(device) for rows in self._host_rows]
        self.live = list(range(len(streams)))

    def __call__(self, probabilities: torch.Tensor) -> torch.Tensor:
        chosen = torch.zeros(probabilities.shape[0], dtype=torch.long, device=probabilities.device)
        for stream in self.live:
            rows = self.rows[stream]
            draws = torch.multinomial(probabilities[rows], 1, generator=self.generators[stream])
            chosen[rows] = draws.squeeze(-1)
        return chosen

    def retire_finished(self, pending: torch.Tensor) -> None:
        """Stop the streams none of whose rows is `pending` (host (rows,) bools): a call of theirs alone ends here."""
        self.live = [stream for stream in self.live if bool(pending[self._host_rows[stream]].any())]


def jump_width(plans: list[Any]) -> int:
    """Tokens a jump iteration feeds per row: a value token plus the longest forced sequence of the plans."""
    return 1 + max(len(sequence) for plan in plans for sequence in plan.sequences)


def call_tables(
    decoder: Any, plans: list[Any], vocab: int, k: int, device: torch.device, slot_values: Any, width: int,
    bins: torch.Tensor | None = None,
) -> CallTables:
    """The value tables, forced sequences and catalog tries of one decode call, on `device`; `bins` the logits'
    `sampling.nucleus_bins` where a draw's nucleus counts them instead of sorting."""
    host_tables = value_tables(decoder.tokenizer, vocab)
    tables = host_tables.on(device)
    catalog = None if slot_values is None else decoder._tries.tables(slot_values, k, host_tables, device)
    bank = ForcedSequenceBank.of(plans, decoder.pad_token_id, device)
    reserve = 1 + bank.longest_close
    return CallTables(
        admissible=tables.admissible, closes=tables.closes, adds_content=tables.adds_content,
        next_state=tables.next_state, forced_tokens=bank.tokens, forced_lengths=bank.lengths, tails=bank.tails,
        seq_base=bank.sequence_base.repeat_interleave(k), tail_base=bank.tail_base.repeat_interleave(k),
        num_slots=bank.num_slots.repeat_interleave(k), offsets=torch.arange(width, device=device),
        token_keys=token_keys(vocab, device), reserve=torch.tensor(reserve, device=device), catalog=catalog,
        nucleus_bins=bins,
    )


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
    compiled: bool = False,
    sort_nucleus: bool = False,
    streams: StreamDraws | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, int]:
    """(tokens, value masks, generated lengths, mean value log-probs or None) of every row, on the CPU, and the
    number of decode steps (forwards after the prefill) the loop ran.

    `forward_step(token (rows,), iteration)` (one token per row) or, with `jump`, `forward_step(tokens (rows, W),
    counts (rows,), generated (rows,))` returns the next (rows, vocab) logits; `decoder` gives the settings.
    `sort_nucleus`: top-p's nucleus by a sort whatever the logits' dtype (the reference the counted one is tested to).
    `streams`: generator draws split among the candidates' random streams, in place of `generator`."""
    rows, vocab = logits.shape
    budget = decoder.max_new_tokens
    width = jump_width(plans) if jump else 1
    # a nucleus by counts where the logits are 16-bit floats (one check of the prefill's, which waits for them)
    counted = not sort_nucleus and not greedy and decoder.top_p < 1.0
    bins = nucleus_bins(logits) if counted else None
    tables = call_tables(decoder, plans, vocab, k, device, slot_values, width, bins)
    # a catalog value is as long as its trie path: no token cap
    value_cap = budget + 1 if decoder.fill_budget or tables.catalog is not None else decoder.max_value_tokens
    draw = "greedy" if greedy else "seeds" if row_seeds is not None else "generator"
    if streams is not None and draw != "generator":
        raise ValueError("random streams draw with generators: not with greedy decoding or row seeds")
    settings = LoopSettings(
        budget=budget, value_cap=value_cap, fill_budget=decoder.fill_budget, draw=draw, temperature=decoder.temperature,
        top_p=decoder.top_p, return_logprobs=return_logprobs, jump=jump, pad_token_id=decoder.pad_token_id,
    )
    choose, step_state = (COMPILED_SELECT, COMPILED_ADVANCE) if compiled else (select, advance)
    state = initial_state(rows, device, tables.catalog)
    # `width` spare columns: a jump iteration's padding positions land there, never in a row's output
    out_tokens = torch.full((rows, budget + width), decoder.pad_token_id, dtype=torch.long, device=device)
    out_mask = torch.zeros((rows, budget + width), dtype=torch.bool, device=device)

    steps = 0
    for step in range(budget):
        state, legal, drawn = choose(state, tables, settings, logits, row_seeds)
        if draw != "generator":
            chosen = drawn
        elif streams is not None:
            chosen = streams(drawn)
        else:
            chosen = torch.multinomial(drawn, 1, generator=generator).squeeze(-1)
        state, emitted = step_state(state, tables, settings, logits, chosen, legal)
        if jump:
            out_tokens.scatter_(1, emitted.columns, emitted.tokens)
            out_mask.scatter_(1, emitted.columns, emitted.value_mask)
        else:
            out_tokens[:, step] = emitted.tokens
            out_mask[:, step] = emitted.value_mask
        if step + 1 == budget:
            break
        # Finished rows only emit padding, so checking every few iterations changes no output and spares
        # the GPU from waiting on the CPU after every iteration.
        if not decoder.fill_budget and (step + 1) % DONE_CHECK_INTERVAL == 0:
            if streams is None:
                if not bool((state.mode != DONE).any()):
                    break
            else:
                pending = (state.mode != DONE).cpu()
                if not bool(pending.any()):
                    break
                streams.retire_finished(pending)
        logits = forward_step(emitted.tokens, emitted.counts, emitted.before) if jump else forward_step(emitted.tokens, step)
        steps += 1
    if bool((state.mode != DONE).any()):  # unreachable by the budget rule; kept as a loud guard
        raise RuntimeError("structured decoding ended with an unfinished action")
    logprobs = None
    if return_logprobs:
        counts = out_mask.sum(dim=1)
        logprobs = torch.where(counts > 0, state.logprob_sum / counts.clamp(min=1), torch.zeros_like(state.logprob_sum))
    tokens, masks = out_tokens[:, :budget], out_mask[:, :budget]
    return tokens.cpu(), masks.cpu(), state.generated.cpu(), None if logprobs is None else logprobs.cpu(), steps
