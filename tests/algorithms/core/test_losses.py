"""Value-token log-probs with gradients and the advantage-weighted MAGRPO loss (docs/algorithms.md "Value-token loss")."""

from __future__ import annotations

import math

import pytest
import torch

from tests.generation.conftest import short_request
from travel.agents.models import build_tiny_random
from travel.algorithms.core.losses import (
    NON_FINITE_LOSS,
    advantage_weighted_loss,
    prompt_cache_usable,
    shared_prompt_value_logprobs,
    value_token_logprobs,
)
from travel.generation import StructuredDecoder

SAMPLING_TOLERANCE = 1e-5  # float32: KV-cached incremental decoding vs one full forward


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_random(seed=3)


def manual_logprob(model, prompt, completion, mask):
    """Straight from the definition: full forward over prompt + completion, token t predicted at P-1+t."""
    ids = torch.tensor([list(prompt) + list(completion)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    chosen = [float(logprobs[len(prompt) - 1 + t, token]) for t, (token, m) in enumerate(zip(completion, mask)) if m]
    return sum(chosen) / len(chosen) if chosen else 0.0


def test_batched_logprobs_match_the_definition_for_sequences_of_different_lengths(tiny):
    prompts = [[5, 9, 11, 40], [7, 8], [100, 200, 300, 12, 13, 14]]
    completions = [[21, 22, 23, 24, 25], [30, 31], [50, 51, 52]]
    masks = [[1, 0, 1, 1, 0], [0, 1], [1, 1, 1]]
    got = value_token_logprobs(tiny.model, prompts, completions, masks)
    expected = [manual_logprob(tiny.model, p, c, m) for p, c, m in zip(prompts, completions, masks)]
    assert got.shape == (3,)
    assert torch.allclose(got, torch.tensor(expected), atol=1e-5)
    summed = value_token_logprobs(tiny.model, prompts, completions, masks, normalize=False)
    assert torch.allclose(summed, torch.tensor(expected) * torch.tensor([3.0, 1.0, 3.0]), atol=1e-4)


def test_the_final_completion_token_is_scored(tiny):
    prompt, completion = [3, 4, 5], [60, 61, 62]
    only_last = value_token_logprobs(tiny.model, [prompt], [completion], [[0, 0, 1]])
    only_last = only_last.detach()
    assert float(only_last[0]) == pytest.approx(manual_logprob(tiny.model, prompt, completion, [0, 0, 1]), abs=1e-5)


def test_sequences_without_value_tokens_get_zero_and_count_zero(tiny):
    logprobs, counts = value_token_logprobs(
        tiny.model, [[1, 2], [3, 4]], [[5, 6], [7]], [[0, 0], [1]], return_counts=True
    )
    logprobs = logprobs.detach()
    assert counts.tolist() == [0, 1] and float(logprobs[0]) == 0.0 and float(logprobs[1]) < 0


# one prompt, completions of different lengths: one token only, no value token, the longest last
GROUP_PROMPT = [5, 9, 11, 40, 41, 42, 43]
GROUP_COMPLETIONS = [[21, 22, 23, 24, 25], [30], [31, 32, 33], [50, 51, 52, 53, 54, 55, 56]]
GROUP_MASKS = [[1, 0, 1, 1, 1], [1], [0, 0, 0], [0, 1, 1, 0, 1, 1, 1]]


@pytest.mark.parametrize("attention, checkpointed", [("sdpa", False), ("eager", False), ("sdpa", True)])
def test_a_packed_group_gives_the_same_logprobs_and_gradients_as_separate_sequences(attention, checkpointed):
    """Over the prompt's cache (a prompt forward, then the completions), or in one masked forward when activation
    checkpointing drops the cache."""
    model = build_tiny_random(seed=3, attn_implementation=attention, gradient_checkpointing=checkpointed).model
    assert prompt_cache_usable(model) is not checkpointed
    advantages = torch.tensor([1.0, -0.5, 2.0, -1.5])

    def grads_of(logprobs, counts):
        model.zero_grad()
        advantage_weighted_loss(logprobs, advantages, counts).backward()
        return [p.grad.clone() for p in model.parameters()]

    separate, separate_counts = value_token_logprobs(
        model, [GROUP_PROMPT] * 4, GROUP_COMPLETIONS, GROUP_MASKS, return_counts=True
    )
    packed, packed_counts = shared_prompt_value_logprobs(
        model, GROUP_PROMPT, GROUP_COMPLETIONS, GROUP_MASKS, return_counts=True
    )
    assert packed_counts.tolist() == separate_counts.tolist() == [4, 1, 0, 5]
    assert float(packed[2].detach()) == 0.0
    assert torch.allclose(packed, separate, atol=1e-5)
    expected = [manual_logprob(model, GROUP_PROMPT, c, m) for c, m in zip(GROUP_COMPLETIONS, GROUP_MASKS)]
    assert torch.allclose(packed.detach(), torch.tensor(expected), atol=1e-5)
    summed = shared_prompt_value_logprobs(model, GROUP_PROMPT, GROUP_COMPLETIONS, GROUP_MASKS, normalize=False)
    assert torch.allclose(summed, separate * torch.tensor([4.0, 1.0, 1.0, 5.0]), atol=1e-4)
    for got, want in zip(grads_of(packed, packed_counts), grads_of(separate, separate_counts)):
        assert torch.allclose(got, want, atol=1e-5, rtol=1e-4)


def test_a_packed_completion_does_not_see_the_other_completions(tiny):
    alone = shared_prompt_value_logprobs(tiny.model, GROUP_PROMPT, GROUP_COMPLETIONS[3:], GROUP_MASKS[3:])
    behind_others = shared_prompt_value_logprobs(tiny.model, GROUP_PROMPT, GROUP_COMPLETIONS, GROUP_MASKS)
    assert torch.allclose(alone[0], behind_others[3], atol=1e-5)


def test_mask_length_mismatch_names_the_lengths(tiny):
    with pytest.raises(ValueError, match="sequence 1: the value mask has 2 entries but the completion has 3 tokens"):
        value_token_logprobs(tiny.model, [[1], [2]], [[3], [4, 5, 6]], [[1], [1, 1]])
    with pytest.raises(ValueError, match="2 prompts, 1 completions"):
        value_token_logprobs(tiny.model, [[1], [2]], [[3]], [[1]])


def test_sampling_logprob_equals_training_logprob_and_gradients_reach_the_weights(tiny):
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, max_new_tokens=150, max_value_tokens=5)
    requests = [short_request(tiny.tokenizer, 0, 3), short_request(tiny.tokenizer, 1, 3, "with a longer note")]
    groups = decoder.generate(requests, 2, return_logprobs=True, seeds=[1, 2])
    candidates = [c for group in groups for c in group]
    logprobs, counts = value_token_logprobs(
        tiny.model,
        [c.prompt_ids for c in candidates],
        [c.token_ids for c in candidates],
        [c.value_mask for c in candidates],
        return_counts=True,
    )
    sampled = torch.tensor([c.logprob for c in candidates])
    assert torch.allclose(logprobs.detach(), sampled, atol=SAMPLING_TOLERANCE)
    assert counts.tolist() == [int(c.value_mask.sum()) for c in candidates]

    tiny.model.zero_grad()
    loss = advantage_weighted_loss(logprobs, torch.tensor([1.0, -1.0, 0.5, -0.5]), counts)
    loss.backward()
    grads = [p.grad for p in tiny.model.parameters()]
    assert all(g is not None for g in grads) and sum(float(g.abs().sum()) for g in grads) > 0


def test_loss_is_the_mean_over_sequences_with_value_tokens():
    logprobs = torch.tensor([-1.0, -2.0, -3.0], requires_grad=True)
    loss = advantage_weighted_loss(logprobs, [2.0, 1.0, 5.0], token_counts=[4, 0, 1])
    assert float(loss.detach()) == pytest.approx(-((-1.0 * 2.0) + (-3.0 * 5.0)) / 2)
    loss.backward()
    assert logprobs.grad.tolist() == [-1.0, 0.0, -2.5]


def test_loss_without_counted_sequences_is_zero_and_non_finite_becomes_constant():
    logprobs = torch.tensor([-1.0, -2.0], requires_grad=True)
    zero = advantage_weighted_loss(logprobs, [1.0, 1.0], token_counts=[0, 0])
    assert float(zero.detach()) == 0.0 and zero.requires_grad
    bad = advantage_weighted_loss(torch.tensor([float("nan"), -1.0], requires_grad=True), [1.0, 1.0])
    assert float(bad.detach()) == pytest.approx(NON_FINITE_LOSS) and bad.requires_grad
    bad.backward()  # must not raise
    inf = advantage_weighted_loss(torch.tensor([-1.0], requires_grad=True), [math.inf])
    assert float(inf.detach()) == pytest.approx(NON_FINITE_LOSS)
    with pytest.raises(ValueError, match="3 advantages for 2 log-probs"):
        advantage_weighted_loss(logprobs, [1.0, 2.0, 3.0])
