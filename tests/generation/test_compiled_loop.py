"""The decode loop through torch.compile (travel/generation/loop_step.py, `hardware.compile_decode`): the compiled
token choice and state update give the tokens, value masks and lengths of the plain loop, and log-probs equal to
float rounding, for every draw (greedy, per-row seeds, a torch.Generator), one-token and jump iterations, free
and catalog values, both roles. The model is a stand-in that returns fixed random logits, so the loop is all
that runs; the fixed logits over the whole vocabulary also reach tokens a trained model rarely would."""

from __future__ import annotations

import pytest
import torch

from tests.fixtures import fixture_row
from tests.generation.conftest import short_request
from travel.agents.models import build_tiny_random
from travel.generation import StructuredDecoder, role_request, sampling
from travel.generation.decode_loop import COMPILED_ADVANCE, COMPILED_SELECT, decode_loop
from travel.generation.value_trie import checked_slot_values


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_random(seed=3)


class FixedLogits:
    """A stand-in forward: one of a few fixed (rows, vocab) logit tensors, picked by the tokens written so far;
    `half`: bfloat16 values, as a bfloat16 model's output head writes them."""

    def __init__(self, rows: int, vocab: int, seed: int = 0, half: bool = False):
        generator = torch.Generator().manual_seed(seed)
        self.pool = [3 * torch.randn(rows, vocab, generator=generator) for _ in range(5)]
        if half:
            self.pool = [logits.to(torch.bfloat16).float() for logits in self.pool]

    def one_token(self, token: torch.Tensor, step: int) -> torch.Tensor:
        return self.pool[step % len(self.pool)]

    def jump(self, tokens: torch.Tensor, counts: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
        return self.pool[int(before.sum() + counts.sum()) % len(self.pool)]


def run_loop(decoder, requests, k: int, draw: str, compiled: bool, jump: bool = False, half: bool = False):
    plans = [decoder.plan(request.agent_id, request.days) for request in requests]
    slot_values = checked_slot_values(requests, plans) if decoder.values == "catalog" else None
    rows = len(plans) * k
    forward = FixedLogits(rows, decoder.model.config.vocab_size, half=half)
    generator = torch.Generator().manual_seed(7) if draw == "generator" else None
    row_seeds = torch.arange(rows) * 3 + 1 if draw == "seeds" else None
    tokens, masks, lengths, logprobs, steps = decode_loop(
        decoder, plans, forward.pool[-1], k, draw == "greedy", True, generator, row_seeds, torch.device("cpu"),
        forward.jump if jump else forward.one_token, slot_values, jump=jump, compiled=compiled,
        sort_nucleus=decoder.sort_nucleus,
    )
    return tokens, masks, lengths, logprobs, steps


def assert_same_decode(decoder, requests, k, draw, jump=False, half=False):
    plain = run_loop(decoder, requests, k, draw, compiled=False, jump=jump, half=half)
    compiled = run_loop(decoder, requests, k, draw, compiled=True, jump=jump, half=half)
    assert not COMPILED_SELECT.failed and not COMPILED_ADVANCE.failed  # compiled, not the plain fallback
    for name, want, got in zip(("tokens", "value masks", "lengths"), plain[:3], compiled[:3]):
        assert torch.equal(got, want), name
    assert compiled[3] == pytest.approx(plain[3], rel=1e-5, abs=1e-6)
    assert compiled[4] == plain[4]
    assert bool(plain[1].any())  # the loop sampled value tokens, not only the forced skeleton
    return plain


@pytest.mark.parametrize("draw", ["greedy", "seeds", "generator"])
@pytest.mark.parametrize("jump", [False, True], ids=["one-token", "jump"])
def test_the_compiled_loop_decodes_free_values_as_the_plain_loop(tiny, draw, jump):
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, max_new_tokens=260, max_value_tokens=5, top_p=0.9)
    requests = [short_request(tiny.tokenizer, agent, 2) for agent in (0, 1)]
    tokens, *_ = assert_same_decode(decoder, requests, 3, draw, jump)
    if draw != "greedy":  # the draw is random: candidates of one request differ
        assert not torch.equal(tokens[0], tokens[1])


@pytest.mark.parametrize("draw", ["seeds", "generator"])
def test_logits_of_a_16_bit_head_draw_from_the_counted_nucleus_what_the_sorted_one_gives(tiny, draw, monkeypatch):
    """bfloat16 logits: the loop finds the nucleus by counts (`sampling.half_top_p_filter`), compiled as plain,
    and draws the tokens that the sorted nucleus gives; float32 logits sort."""
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, max_new_tokens=260, max_value_tokens=5, top_p=0.9)
    requests = [short_request(tiny.tokenizer, agent, 2) for agent in (0, 1)]
    counted = assert_same_decode(decoder, requests, 3, draw, half=True)
    calls = []
    filter_by_counts = sampling.half_top_p_filter
    monkeypatch.setattr(sampling, "half_top_p_filter", lambda *args: calls.append(1) or filter_by_counts(*args))
    steps = run_loop(decoder, requests, 3, draw, False, half=True)[4]
    assert len(calls) == steps + 1  # every iteration's draw: after the prefill and after each step
    run_loop(decoder, requests, 3, draw, False)  # float32 logits
    decoder.sort_nucleus = True
    by_sort = run_loop(decoder, requests, 3, draw, False, half=True)
    assert len(calls) == steps + 1  # neither the float32 run nor the switched-off one counted
    for name, want, got in zip(("tokens", "value masks", "lengths"), counted[:3], by_sort[:3]):
        assert torch.equal(got, want), name


@pytest.mark.parametrize("draw", ["greedy", "seeds"])
def test_the_compiled_loop_decodes_catalog_values_as_the_plain_loop(tiny, draw):
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, max_new_tokens=700, values="catalog")
    requests = [role_request(tiny.tokenizer, fixture_row(), agent, values="catalog") for agent in (0, 1)]
    assert_same_decode(decoder, requests, 2, draw)


def test_the_compiled_loop_forces_budget_closes_as_the_plain_loop(tiny):
    """Five days with 30 tokens to spare over the shortest action: closes forced by the budget rule."""
    plan = StructuredDecoder(tiny.model, tiny.tokenizer).plan(1, 5)
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, max_new_tokens=plan.minimum_tokens + 30, max_value_tokens=8)
    assert_same_decode(decoder, [short_request(tiny.tokenizer, 1, 5)], 4, "seeds")
