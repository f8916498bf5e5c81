"""What every shared-prefix attention kernel shares: a step's queries laid out per row or per prompt, and the merge
of a prefix part normalised over the prefix alone with the rows' suffix attention under one normaliser (by their
log-sum-exps). travel/generation/prefix_attention.py and travel/generation/kernels/prefix_kernels.py use them."""

from __future__ import annotations

import torch


def to_prompts(tensor: torch.Tensor, prompts: int, repeats: int) -> torch.Tensor:
    """(rows, H, group, X) -> (prompts, H, K x group, X)."""
    rows, heads, group, last = tensor.shape
    return tensor.reshape(prompts, repeats, heads, group, last).transpose(1, 2).reshape(prompts, heads, repeats * group, last)


def to_rows(tensor: torch.Tensor, prompts: int, repeats: int) -> torch.Tensor:
    """(prompts, H, K x group, X) -> (rows, H, group, X)."""
    heads, last = tensor.shape[1], tensor.shape[-1]
    group = tensor.shape[2] // repeats
    return tensor.reshape(prompts, heads, repeats, group, last).transpose(1, 2).reshape(prompts * repeats, heads, group, last)


def with_suffix(from_prefix, prefix_lse, per_row, key, value, suffix_mask, scale: float) -> torch.Tensor:
    """The float32 prefix part (rows, kv heads, group, head dim), normalised over the prefix alone with log-sum-exp
    `prefix_lse` (rows, kv heads, group, 1), merged with the rows' suffix attention under the joint normaliser."""
    suffix_scores = torch.matmul(per_row, key.transpose(-1, -2)).float() * scale + suffix_mask
    total = torch.logaddexp(prefix_lse, torch.logsumexp(suffix_scores, dim=-1, keepdim=True))
    suffix_weights = torch.exp(suffix_scores - total).to(value.dtype)  # the joint softmax over the suffix columns
    output = from_prefix * torch.exp(prefix_lse - total) + torch.matmul(suffix_weights, value).float()
    return output.to(value.dtype)
