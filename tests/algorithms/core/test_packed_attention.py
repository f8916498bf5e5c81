"""The one-mask packed update's attention split at the prompt's end (travel/algorithms/core/packed_attention.py) is the
masked attention over the whole square, and a checkpointed model runs it in its forward and its recomputation."""

from __future__ import annotations

import torch

from travel.agents.models import build_tiny_random
from travel.algorithms.core.packed_attention import PACKED_PROMPT_TOKENS, packed_prompt_attention
from travel.generation.static_step import transformers_sdpa


def packed_mask(prompt: int, completions: list[int]) -> torch.Tensor:
    """The additive (1, 1, n, n) mask of losses.shared_prompt_value_logprobs' one-mask form."""
    segment = torch.cat([torch.full((prompt,), -1)] + [torch.full((n,), s) for s, n in enumerate(completions)])
    index = torch.arange(len(segment))
    allowed = (index[None, :] <= index[:, None]) & ((segment[None, :] == -1) | (segment[None, :] == segment[:, None]))
    return torch.zeros(1, 1, len(segment), len(segment)).masked_fill(~allowed, torch.finfo(torch.float32).min)


class GroupedAttention(torch.nn.Module):
    num_key_value_groups, is_causal = 2, True


def test_the_split_is_the_masked_attention_over_the_whole_square():
    generator = torch.Generator().manual_seed(0)
    mask = packed_mask(9, [4, 1, 3])
    query = torch.randn(1, 4, 17, 8, generator=generator)
    key, value = torch.randn(1, 2, 17, 8, generator=generator), torch.randn(1, 2, 17, 8, generator=generator)
    module = GroupedAttention()
    expected, _ = transformers_sdpa(module, query, key, value, mask, 0.3, 0.0)
    got, _ = packed_prompt_attention(module, query, key, value, mask, scaling=0.3, **{PACKED_PROMPT_TOKENS: 9})
    assert got.shape == expected.shape == (1, 17, 4, 8)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
    unsplit, _ = packed_prompt_attention(module, query, key, value, mask, scaling=0.3)
    assert torch.equal(unsplit, expected)  # without the argument: transformers' SDPA as it is


def test_a_checkpointed_model_splits_its_forward_and_its_recomputation():
    """The split ignores the mask's prompt rows: with those rows opened to the whole prompt, a split forward and
    backward equal the true mask's, which only holds if the recomputation in backward splits too."""
    model = build_tiny_random(seed=3, gradient_checkpointing=True).model
    model.train()
    backbone = model.base_model
    ids = torch.randint(5, 100, (1, 17), generator=torch.Generator().manual_seed(1))
    mask = packed_mask(9, [4, 1, 3])
    opened = mask.clone()
    opened[..., :9, :9] = 0.0  # the prompt's rows see the whole prompt: not what the split computes

    def run(attention, **split):
        model.zero_grad()
        hidden = backbone(input_ids=ids, attention_mask=attention, use_cache=False, **split).last_hidden_state
        (hidden * torch.linspace(-1, 1, hidden.shape[-1])).sum().backward()
        return hidden.detach(), [parameter.grad.clone() for parameter in model.parameters()]

    expected, expected_grads = run(mask)
    split, split_grads = run(opened, **{PACKED_PROMPT_TOKENS: 9})
    dense_opened, _ = run(opened)
    assert not torch.allclose(dense_opened, expected, atol=1e-3)  # the opened rows change what SDPA computes
    torch.testing.assert_close(split, expected, atol=1e-5, rtol=1e-4)
    for got, want in zip(split_grads, expected_grads):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-3)
