"""Attention over a prompt kept once plus each candidate's own suffix equals attention over a cache that
repeats the prompt for every candidate."""

from __future__ import annotations

import torch

from travel.generation.shared_prefix import PrefixState, shared_prefix_attention, shared_prefix_decode_attention
from travel.generation.static_step import grouped_decode_attention


class Attention:
    """The attributes transformers' attention functions read from the module."""

    def __init__(self, layer_idx, groups):
        self.layer_idx, self.num_key_value_groups = layer_idx, groups
        self.is_causal, self.training = True, False


def test_a_shared_prefix_equals_the_repeated_prompt_cache():
    generator = torch.Generator().manual_seed(0)
    prompts, repeats, query_heads, kv_heads, width, capacity, dim = 2, 3, 8, 2, 11, 7, 16
    rows = prompts * repeats
    prefix_keys = torch.randn(prompts, kv_heads, width, dim, generator=generator)
    prefix_values = torch.randn(prompts, kv_heads, width, dim, generator=generator)
    suffix_keys = torch.randn(rows, kv_heads, capacity, dim, generator=generator)
    suffix_values = torch.randn(rows, kv_heads, capacity, dim, generator=generator)
    query = torch.randn(rows, query_heads, 1, dim, generator=generator)
    prefix_bias = torch.zeros(prompts, 1, 1, width)
    prefix_bias[1, ..., :4] = float("-inf")  # the second prompt is shorter: left padding
    suffix_bias = torch.zeros(rows, 1, 1, capacity)
    suffix_bias[..., 5:] = float("-inf")  # positions not written yet
    suffix_bias[0, ..., 3:5] = float("-inf")

    # the same attention over one cache per row: its prompt's keys, then its own suffix
    keys = torch.cat([prefix_keys.repeat_interleave(repeats, 0), suffix_keys], dim=2)
    values = torch.cat([prefix_values.repeat_interleave(repeats, 0), suffix_values], dim=2)
    mask = torch.cat([prefix_bias.repeat_interleave(repeats, 0), suffix_bias], dim=-1)
    module = Attention(layer_idx=1, groups=query_heads // kv_heads)
    expected, _ = grouped_decode_attention(module, query, keys, values, mask, scaling=0.3)

    other_layer = (torch.zeros_like(prefix_keys), torch.zeros_like(prefix_values))
    state = PrefixState([other_layer, (prefix_keys, prefix_values)], prefix_bias)
    model = type("Model", (), {"config": type("Config", (), {"_attn_implementation": "sdpa"})()})()
    with shared_prefix_attention(model, state):
        got, weights = shared_prefix_decode_attention(module, query, suffix_keys, suffix_values, suffix_bias, scaling=0.3)
    assert model.config._attn_implementation == "sdpa"
    assert weights is None and got.shape == expected.shape == (rows, 1, query_heads, dim)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # candidates of one prompt see that prompt only: swapping the prompts' keys changes the result
    swapped = PrefixState([other_layer, (prefix_keys.flip(0), prefix_values.flip(0))], prefix_bias)
    with shared_prefix_attention(model, swapped):
        wrong, _ = shared_prefix_decode_attention(module, query, suffix_keys, suffix_values, suffix_bias, scaling=0.3)
    assert not torch.allclose(wrong, expected, atol=1e-3)


def test_without_a_prefix_the_function_is_plain_sdpa():
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    generator = torch.Generator().manual_seed(1)
    query = torch.randn(2, 4, 5, 8, generator=generator)  # a 5-token prefill
    key = torch.randn(2, 2, 5, 8, generator=generator)
    value = torch.randn(2, 2, 5, 8, generator=generator)
    module = Attention(layer_idx=0, groups=2)
    got, _ = shared_prefix_decode_attention(module, query, key, value, None, scaling=0.5)
    expected, _ = sdpa_attention_forward(module, query, key, value, None, scaling=0.5)
    torch.testing.assert_close(got, expected)


def test_only_models_whose_attention_modules_know_their_layer_share_the_prompt(tiny):
    from travel.generation.shared_prefix import shared_prefix_supported

    assert shared_prefix_supported(tiny.model)
    assert not shared_prefix_supported(torch.nn.Sequential(torch.nn.Linear(2, 2)))  # no attention modules at all
    anonymous = torch.nn.Module()
    anonymous.self_attn = torch.nn.Linear(2, 2)  # an attention module without a layer index
    assert not shared_prefix_supported(anonymous)
