"""hardware.decode_weights=copy (travel/generation/kernels/decode_weights.py): decoding over a compute-dtype copy of the
weights gives what decoding a model converted to that dtype gives, follows every change of the master weights,
and leaves the master weights (fp32, trainable) as they were; the folded copy folds the norms' weights as they are."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.generation.conftest import short_request
from travel.agents.models import build_tiny_random
from travel.generation import StructuredDecoder
from travel.generation.kernels.decode_weights import DecodeWeights

SETTINGS = {"max_new_tokens": 160, "max_value_tokens": 4, "temperature": 0.9, "top_p": 0.9}


def outputs(decoder, requests, greedy):
    groups = decoder.generate(requests, 3, greedy=greedy, return_logprobs=True, seeds=None if greedy else [5, 9])
    return [(c.text, c.token_ids.tolist(), c.value_mask.tolist(), c.logprob) for group in groups for c in group]


def converted(model):
    """The reference: the model's parameters in bf16 (its buffers, the rotary frequencies, stay fp32), decoded
    without autocast."""
    reference = copy.deepcopy(model)
    for parameter in reference.parameters():
        parameter.data = parameter.data.to(torch.bfloat16)
    return reference


@pytest.mark.parametrize("step_backend", ["eager", "static"])
@pytest.mark.parametrize("greedy", [True, False], ids=["greedy", "seeded"])
def test_decoding_over_the_copy_equals_decoding_the_model_converted_to_bf16(step_backend, greedy):
    tiny = build_tiny_random(seed=3)
    requests = [short_request(tiny.tokenizer, agent, 3) for agent in (0, 1)]
    ours = StructuredDecoder(
        tiny.model, tiny.tokenizer, step_backend=step_backend, compute_dtype="bfloat16", decode_weights="copy", **SETTINGS
    )
    reference = StructuredDecoder(converted(tiny.model), tiny.tokenizer, step_backend=step_backend, **SETTINGS)
    assert outputs(ours, requests, greedy) == outputs(reference, requests, greedy)
    assert all(p.dtype == torch.float32 and p.requires_grad for p in tiny.model.parameters())


@pytest.mark.parametrize("decode_weights", ["copy", "fused"])
def test_the_copy_follows_every_change_of_the_master_weights_and_their_storage(decode_weights):
    tiny = build_tiny_random(seed=3)
    requests = [short_request(tiny.tokenizer, 1, 3)]
    decoder = StructuredDecoder(
        tiny.model, tiny.tokenizer, compute_dtype="bfloat16", decode_weights=decode_weights, **SETTINGS
    )
    before = outputs(decoder, requests, greedy=True)
    optimizer = torch.optim.SGD(tiny.model.parameters(), lr=1.0)
    with torch.no_grad():
        for parameter in tiny.model.parameters():
            parameter.grad = torch.randn_like(parameter) * 0.05
    optimizer.step()
    after = outputs(decoder, requests, greedy=True)
    assert after != before
    assert after == outputs(StructuredDecoder(converted(tiny.model), tiny.tokenizer, **SETTINGS), requests, greedy=True)
    for parameter in tiny.model.parameters():  # new storage, as parking to host memory and back gives
        parameter.data = parameter.data.flip(-1).clone()
    moved = outputs(decoder, requests, greedy=True)
    assert moved != after
    assert moved == outputs(StructuredDecoder(converted(tiny.model), tiny.tokenizer, **SETTINGS), requests, greedy=True)


def test_the_folded_copy_folds_the_norms_of_the_weights_as_they_are_at_each_call():
    """decode_weights=folded scales its fused matrices by the norms' weights at every refresh: after an optimizer step
    that changed the norms too, it decodes the model's tokens with its log-probs up to float32 rounding (the fold
    multiplies in another order), and a refresh without a change folds nothing twice."""
    tiny = build_tiny_random(seed=3)
    requests = [short_request(tiny.tokenizer, agent, 3) for agent in (0, 1)]
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, decode_weights="folded", **SETTINGS)
    plain = StructuredDecoder(tiny.model, tiny.tokenizer, **SETTINGS)

    def same(ours, theirs):
        assert [row[:3] for row in ours] == [row[:3] for row in theirs]
        assert [row[3] for row in ours] == pytest.approx([row[3] for row in theirs], abs=1e-4)

    before = outputs(decoder, requests, greedy=False)
    assert outputs(decoder, requests, greedy=False) == before
    same(before, outputs(plain, requests, greedy=False))
    optimizer = torch.optim.SGD(tiny.model.parameters(), lr=1.0)
    with torch.no_grad():
        for parameter in tiny.model.parameters():
            parameter.grad = torch.randn_like(parameter) * 0.05
    optimizer.step()
    assert tiny.model.model.layers[0].input_layernorm.weight.ne(1).all()
    after = outputs(decoder, requests, greedy=False)
    assert [row[:3] for row in after] != [row[:3] for row in before]
    assert outputs(decoder, requests, greedy=False) == after
    same(after, outputs(plain, requests, greedy=False))


def test_the_copy_is_built_once_keeps_tied_weights_tied_and_trains_nothing():
    tiny = build_tiny_random(seed=3)
    weights = DecodeWeights(torch.bfloat16)
    first = weights.refreshed(tiny.model)
    assert weights.refreshed(tiny.model) is first
    assert first.lm_head.weight is first.model.embed_tokens.weight  # tie_word_embeddings
    assert all(p.dtype == torch.bfloat16 and not p.requires_grad for p in first.parameters())
    assert all(not p.is_floating_point() or p.dtype == torch.float32 for p in tiny.model.parameters())
    assert torch.equal(first.model.embed_tokens.weight, tiny.model.model.embed_tokens.weight.to(torch.bfloat16))


def test_a_copy_needs_a_compute_dtype_and_the_option_is_checked():
    tiny = build_tiny_random(seed=3)
    with pytest.raises(ValueError, match="hardware.decode_weights=copy needs hardware.compute_dtype"):
        StructuredDecoder(tiny.model, tiny.tokenizer, decode_weights="copy")
    with pytest.raises(ValueError, match="hardware.decode_weights='cast'"):
        StructuredDecoder(tiny.model, tiny.tokenizer, compute_dtype="bfloat16", decode_weights="cast")
