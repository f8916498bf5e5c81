"""Fixed-shape decode steps (and their CUDA graphs) give what the eager decode loop gives."""

from __future__ import annotations

import pytest
import torch

from tests.generation.conftest import assert_strict_action, short_request
from travel.agents.models import build_tiny_random
from travel.generation import StructuredDecoder
from travel.generation.model_io import decode_attention
from travel.generation.static_step import (
    CAUSAL_PROMPT_ATTENTION,
    GROUPED_DECODE_ATTENTION,
    MASK_ALIGNMENT,
    aligned_capacity,
    causal_prompt_attention,
    causal_prompt_attention_function,
    grouped_decode_attention,
)
from travel.generation.shared_prefix import SHARED_PREFIX_ATTENTION


def _requests(tokenizer):
    return [
        short_request(tokenizer, 0, 3, "A much longer request text that pads the other prompt on the left side."),
        short_request(tokenizer, 1, 3),
    ]


def _decode(model, tokenizer, backend, share_prompt_cache="auto", candidates=3, **generate):
    decoder = StructuredDecoder(
        model, tokenizer, max_new_tokens=170, max_value_tokens=5, step_backend=backend, share_prompt_cache=share_prompt_cache
    )
    return decoder.generate(_requests(tokenizer), candidates, return_logprobs=True, **generate)


@pytest.mark.parametrize(
    ("share_prompt_cache", "candidates"),
    [("auto", 3), ("never", 3), ("always", 1)],
    ids=["prompt-once", "prompt-per-row", "prompt-once-single-candidate"],
)
@pytest.mark.parametrize("backend", ["static", "cuda_graph"])  # no CUDA here: cuda_graph runs the static steps
@pytest.mark.parametrize("mode", [{"greedy": True}, {"seeds": [11, 40]}])
def test_static_steps_equal_the_eager_loop(tiny, backend, mode, share_prompt_cache, candidates):
    eager = _decode(tiny.model, tiny.tokenizer, "eager", candidates=candidates, **mode)
    static = _decode(tiny.model, tiny.tokenizer, backend, share_prompt_cache, candidates, **mode)
    for agent, (group_eager, group_static) in enumerate(zip(eager, static)):
        for a, b in zip(group_eager, group_static):
            assert torch.equal(a.token_ids, b.token_ids) and torch.equal(a.value_mask, b.value_mask)
            assert a.text == b.text
            assert b.logprob == pytest.approx(a.logprob, abs=1e-5)
            assert_strict_action(b.text, agent, 3)
    assert tiny.model.config._attn_implementation == "sdpa"  # restored after decoding


def test_static_steps_reach_the_token_budget(tiny):
    """The last decode step writes the cache's last budget position; the capacity is aligned for the mask."""
    tokenizer = tiny.tokenizer
    budget = 130
    outputs = {}
    for backend in ("eager", "static"):
        decoder = StructuredDecoder(tiny.model, tokenizer, max_new_tokens=budget, fill_budget=True, step_backend=backend)
        outputs[backend] = decoder.generate([short_request(tokenizer, 0, 3)], 2, seeds=[3])[0]
    for a, b in zip(outputs["eager"], outputs["static"]):
        assert torch.equal(a.token_ids, b.token_ids)
    assert aligned_capacity(100, 30) == 144 and aligned_capacity(98, 30) == 128
    assert aligned_capacity(7, 9) % MASK_ALIGNMENT == 0


def test_grouped_attention_equals_repeated_key_value_heads():
    """Query heads h = g * group .. g * group + group - 1 share key/value head g, as transformers' repeat_kv has it."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    generator = torch.Generator().manual_seed(0)
    batch, query_heads, kv_heads, length, dim = 3, 8, 2, 21, 16
    query = torch.randn(batch, query_heads, 1, dim, generator=generator)
    key = torch.randn(batch, kv_heads, length, dim, generator=generator)
    value = torch.randn(batch, kv_heads, length, dim, generator=generator)
    mask = torch.zeros(batch, 1, 1, length)
    mask[0, ..., :5] = float("-inf")  # left padding of the first row
    mask[:, ..., -3:] = float("-inf")  # positions not written yet

    class Module:
        num_key_value_groups = query_heads // kv_heads
        is_causal = True
        training = False

    expected, _ = sdpa_attention_forward(Module(), query, key, value, mask, scaling=0.25)
    got, weights = grouped_decode_attention(Module(), query, key, value, mask, scaling=0.25)
    assert weights is None and got.shape == expected.shape == (batch, 1, query_heads, dim)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # A different head order would not match: swapping two key/value heads changes the result.
    swapped, _ = grouped_decode_attention(Module(), query, key.flip(1), value.flip(1), mask, scaling=0.25)
    assert not torch.allclose(swapped, expected, atol=1e-3)


def test_a_prompt_into_an_empty_cache_attends_causally_whatever_mask_it_is_given():
    """The prefill's attention drops the mask (a trace keeps transformers' causal mask, which would pick a slower
    kernel) only where queries and keys are the same positions; queries over a longer cache keep it."""
    generator = torch.Generator().manual_seed(1)
    query_heads, kv_heads, length, dim = 4, 2, 9, 8
    query = torch.randn(1, query_heads, length, dim, generator=generator)
    key = torch.randn(1, kv_heads, length, dim, generator=generator)
    value = torch.randn(1, kv_heads, length, dim, generator=generator)

    class Module:
        num_key_value_groups = query_heads // kv_heads
        is_causal = True
        training = False

    grouped_keys = key.double().repeat_interleave(Module.num_key_value_groups, dim=1)
    grouped_values = value.double().repeat_interleave(Module.num_key_value_groups, dim=1)
    scores = query.double() @ grouped_keys.transpose(-1, -2) * 0.3
    future = torch.ones(length, length, dtype=torch.bool).triu(1)
    causal = scores.masked_fill(future, float("-inf")).softmax(-1) @ grouped_values
    no_mask = torch.zeros(1, 1, length, length)  # attend everywhere: what a dropped mask must not mean
    got, _ = causal_prompt_attention_function(Module(), query, key, value, no_mask, scaling=0.3)
    torch.testing.assert_close(got.double(), causal.transpose(1, 2), atol=1e-5, rtol=1e-5)
    # two new queries over the whole cache keep their mask: here it hides the first three keys
    mask = torch.zeros(1, 1, 2, length)
    mask[..., :3] = float("-inf")
    kept, _ = causal_prompt_attention_function(Module(), query[:, :, -2:], key, value, mask, scaling=0.3)
    visible = (scores[:, :, -2:, 3:].softmax(-1) @ grouped_values[:, :, 3:]).transpose(1, 2)
    torch.testing.assert_close(kept.double(), visible, atol=1e-5, rtol=1e-5)
    # a sliding-window layer keeps its mask, which carries the window: here, attend everywhere
    windowed = Module()
    windowed.sliding_window = 4
    everywhere, _ = causal_prompt_attention_function(windowed, query, key, value, no_mask, scaling=0.3)
    unmasked = scores.softmax(-1) @ grouped_values
    torch.testing.assert_close(everywhere.double(), unmasked.transpose(1, 2), atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="cuDNN's attention needs a CUDA device")
def test_a_prompt_on_cuda_attends_by_cudnn_and_causally():
    """Inside the decoder's SDPA choice, which leaves cuDNN out, a maskless bf16 prompt with grouped key/value heads
    runs cuDNN's attention, and matches the causal softmax."""
    generator = torch.Generator(device="cuda").manual_seed(2)
    query_heads, kv_heads, length, dim = 32, 8, 777, 128
    shape = lambda heads: (1, heads, length, dim)  # noqa: E731
    query, key, value = (torch.randn(shape(h), generator=generator, device="cuda").bfloat16()
                         for h in (query_heads, kv_heads, kv_heads))

    class Module:
        num_key_value_groups = query_heads // kv_heads
        is_causal = True
        training = False

    priority, cudnn_enabled = torch._C._get_sdp_priority_order(), torch.backends.cuda.cudnn_sdp_enabled()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile, decode_attention(query.device):
        got, _ = causal_prompt_attention_function(Module(), query, key, value, None, scaling=dim**-0.5)
    ran = {event.key for event in profile.key_averages()}
    assert "aten::_scaled_dot_product_cudnn_attention" in ran
    # SDPA's global choice is as it was (a later update's attention is not steered)
    assert (torch._C._get_sdp_priority_order(), torch.backends.cuda.cudnn_sdp_enabled()) == (priority, cudnn_enabled)
    grouped = [t.double().repeat_interleave(Module.num_key_value_groups, dim=1) for t in (key, value)]
    scores = (query.double() @ grouped[0].transpose(-1, -2) * dim**-0.5).masked_fill(
        torch.ones(length, length, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    expected = (scores.softmax(-1) @ grouped[1]).transpose(1, 2)
    torch.testing.assert_close(got.double(), expected, atol=2e-2, rtol=2e-2)


def test_causal_prompt_attention_switches_sdpa_models_only_and_restores_them(tiny):
    with causal_prompt_attention(tiny.model):
        assert tiny.model.config._attn_implementation == CAUSAL_PROMPT_ATTENTION
    assert tiny.model.config._attn_implementation == "sdpa"
    tiny.model.config._attn_implementation = "eager"
    try:
        with causal_prompt_attention(tiny.model):
            assert tiny.model.config._attn_implementation == "eager"
    finally:
        tiny.model.config._attn_implementation = "sdpa"


@pytest.mark.parametrize(
    ("candidates", "share", "attention"),
    [
        (2, "auto", SHARED_PREFIX_ATTENTION),
        (2, "never", GROUPED_DECODE_ATTENTION),
        (1, "auto", SHARED_PREFIX_ATTENTION),  # one candidate shares too: the faster step on GPUs
        (1, "always", SHARED_PREFIX_ATTENTION),
    ],
)
def test_attention_implementation_is_restored_when_decoding_fails(tiny, monkeypatch, candidates, share, attention):
    import travel.generation.loop_step as loop_step
    import travel.generation.shared_prefix as shared_prefix

    def failing(*args, **kwargs):
        assert tiny.model.config._attn_implementation == attention
        raise RuntimeError("sampling failed")

    monkeypatch.setattr(loop_step, "nucleus_scores", failing)
    decoder = StructuredDecoder(
        tiny.model, tiny.tokenizer, max_new_tokens=150, step_backend="static", share_prompt_cache=share
    )
    with pytest.raises(RuntimeError, match="sampling failed"):
        decoder.generate([short_request(tiny.tokenizer, 1, 3)], candidates, seeds=[1])
    assert tiny.model.config._attn_implementation == "sdpa"
    assert shared_prefix._ACTIVE is None


def test_always_sharing_the_prompt_refuses_a_model_whose_layers_cannot_find_their_prefix():
    own = build_tiny_random(seed=2)  # changed below: not the session's model
    for name, module in own.model.named_modules():
        if name.endswith("self_attn"):
            del module.layer_idx
    decoder = StructuredDecoder(own.model, own.tokenizer, max_new_tokens=150, step_backend="static", share_prompt_cache="always")
    with pytest.raises(ValueError, match="share_prompt_cache=always: .* layer_idx"):
        decoder.generate([short_request(own.tokenizer, 1, 3)], 2, seeds=[1])


def test_unknown_prompt_cache_sharing_is_refused(tiny):
    with pytest.raises(ValueError, match="share_prompt_cache=True: choose one of auto, always, never"):
        StructuredDecoder(tiny.model, tiny.tokenizer, share_prompt_cache=True)


def test_auto_steps_are_static_on_the_cpu_where_the_cache_can_be_preallocated(tiny):
    """On the CPU static steps are as fast as eager ones or faster for every candidate count (docs/performance.md)."""
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer)
    assert decoder._static_backend(tiny.model, torch.device("cpu"), True) == "static"
    assert decoder._static_backend(tiny.model, torch.device("cpu"), False) is None  # no preallocated cache


def test_unknown_step_backend_is_refused(tiny):
    with pytest.raises(ValueError, match="step_backend='fast'.*eager, static, cuda_graph"):
        StructuredDecoder(tiny.model, tiny.tokenizer, step_backend="fast")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")
def test_cuda_graph_steps_equal_eager_steps_on_the_gpu():
    from travel.agents.models import build_tiny_random

    loaded = build_tiny_random(seed=0, device="cuda")
    eager = _decode(loaded.model, loaded.tokenizer, "eager", greedy=True)
    graph = _decode(loaded.model, loaded.tokenizer, "cuda_graph", greedy=True)
    for group_eager, group_graph in zip(eager, graph):
        for a, b in zip(group_eager, group_graph):
            assert torch.equal(a.token_ids, b.token_ids)
            assert b.logprob == pytest.approx(a.logprob, abs=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a bfloat16 model's decode steps need a CUDA device")
def test_a_bfloat16_model_on_the_gpu_draws_from_the_counted_nucleus_what_the_sorted_one_gives(monkeypatch):
    from travel.agents.models import build_tiny_random
    from travel.generation import sampling

    loaded = build_tiny_random(seed=0, device="cuda")
    model = loaded.model.to(torch.bfloat16)
    calls = []
    filter_by_counts = sampling.half_top_p_filter
    monkeypatch.setattr(sampling, "half_top_p_filter", lambda *args: calls.append(1) or filter_by_counts(*args))

    def decode(sort_nucleus=False):
        decoder = StructuredDecoder(model, loaded.tokenizer, max_new_tokens=170, max_value_tokens=5, top_p=0.8,
                                    step_backend="cuda_graph")
        decoder.sort_nucleus = sort_nucleus
        return decoder.generate(_requests(loaded.tokenizer), 3, seeds=[3, 8])

    by_counts = decode()
    assert calls  # the steps' logits are bfloat16 values, so the loop counted them
    by_sort = decode(sort_nucleus=True)
    for counted, ordered in zip(by_counts, by_sort):
        assert [c.token_ids.tolist() for c in counted] == [c.token_ids.tolist() for c in ordered]
