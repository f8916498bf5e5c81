"""The one-mask packed update's attention, split at the end of the prompt.

With activation checkpointing a prompt and its candidates run as one packed sequence under one additive
(prompt + candidates)^2 mask (travel/algorithms/core/losses.py). Under a mask SDPA cannot use FlashAttention, and
its memory-efficient kernel computes every block of the square, although the prompt's rows are plain causal
attention over the prompt: only the candidates' rows need the mask. For 4 candidates of ~1k tokens behind a
9k-token prompt the prompt's rows are about 70% of the square, and their causal half 24%. Here they run as causal attention over the
prompt alone (FlashAttention on a GPU, which also skips the blocks above the diagonal), and the candidates'
rows under their rows of the mask over all keys: the same attention, each query over exactly the keys the
mask opens, so the same loss and gradients up to the kernels' rounding.

The forward passes `packed_prompt_tokens=P` (transformers hands unknown keyword arguments down to the
attention function, in a checkpointed layer's recomputation too). The name "sdpa" is registered to
`packed_prompt_attention`, which is transformers' own SDPA function for every call without that argument.
"""

from __future__ import annotations

from typing import Any

import torch

from travel.generation.static_step import register_attention, transformers_sdpa

PACKED_PROMPT_TOKENS = "packed_prompt_tokens"  # the keyword argument the packed forward passes


def packed_prompt_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers attention function: with `packed_prompt_tokens=P` and a (1, 1, n, n) mask, the first P query
    rows attend causally over the first P keys and the others under their mask rows; otherwise transformers' SDPA."""
    prompt = kwargs.pop(PACKED_PROMPT_TOKENS, None)
    if prompt is None or attention_mask is None or attention_mask.dim() != 4 or not 0 < prompt < query.shape[2]:
        return transformers_sdpa(module, query, key, value, attention_mask, scaling, dropout, **kwargs)
    from_prompt, _ = transformers_sdpa(
        module, query[:, :, :prompt], key[:, :, :prompt], value[:, :, :prompt], None, scaling, dropout,
        **{**kwargs, "is_causal": True},
    )
    rest, _ = transformers_sdpa(
        module, query[:, :, prompt:], key, value, attention_mask[:, :, prompt:], scaling, dropout, **kwargs
    )
    return torch.cat([from_prompt, rest], dim=1), None  # (batch, tokens, heads, head dim), as transformers returns


ATTENTION_REGISTERED = register_attention("sdpa", packed_prompt_attention)
