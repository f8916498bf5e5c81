"""torch's FlashAttention kernel as the shared-prefix kernels call it, and plain-torch references of those calls.

`flash_varlen` (variable-length sequences, optionally causal and reading the first `used_keys` keys of each) and
`flash_dense` (one dense batch, not causal) call `torch.ops.aten._flash_attention_forward`, which also returns the
log-sum-exps the kernels merge by. Where that kernel does not run (the CPU, float32) `varlen_reference` and
`dense_reference` compute the same contract in plain torch, so the packing and merging around them are tested on
the CPU.
"""

from __future__ import annotations

import torch


def flash_attention_runs(device: torch.device, dtype: torch.dtype | None) -> bool:
    """Whether `flash_varlen` and `flash_dense` (torch's FlashAttention kernel) run on `device` in `dtype`."""
    if device.type != "cuda" or dtype not in (torch.float16, torch.bfloat16):
        return False
    return torch.backends.cuda.is_flash_attention_available() and torch.cuda.get_device_capability(device) >= (8, 0)


def flash_runs(tensor: torch.Tensor) -> bool:
    """Inside a kernel: whether its inputs take the FlashAttention call. Tensor attributes alone, which torch.compile
    traces without a graph break; `flash_attention_runs` asks the device, once, when the kernel is chosen."""
    return tensor.is_cuda and tensor.dtype in (torch.float16, torch.bfloat16)


def flash_varlen(
    query, key, value, query_offsets, key_offsets, most_queries: int, most_keys: int, scale: float,
    causal: bool = False, used_keys: torch.Tensor | None = None,
):
    """One variable-length FlashAttention call: `varlen_reference`'s contract on the GPU."""
    output, lse, *_ = torch.ops.aten._flash_attention_forward(
        query, key, value, query_offsets, key_offsets, most_queries, most_keys, 0.0, causal, False, scale=scale,
        seqused_k=used_keys,
    )
    return output, lse


def flash_dense(query, key, value, scale: float):
    """One dense (batch, tokens, heads, dim) FlashAttention call, not causal; it chooses its own key splits."""
    output, lse, *_ = torch.ops.aten._flash_attention_forward(
        query, key, value, None, None, query.shape[1], key.shape[1], 0.0, False, False, scale=scale
    )
    return output, lse


def dense_reference(query, key, value, scale: float):
    """`flash_dense`'s contract for a batch of one, by `varlen_reference`: (1, queries, heads, dim) output and
    (1, heads, queries) log-sum-exps."""
    queries, keys = query.shape[1], key.shape[1]
    query_offsets = torch.tensor([0, queries], dtype=torch.int32, device=query.device)
    key_offsets = torch.tensor([0, keys], dtype=torch.int32, device=query.device)
    output, lse = varlen_reference(query[0], key[0], value[0], query_offsets, key_offsets, queries, keys, scale)
    return output[None], lse[None]


def varlen_reference(
    query, key, value, query_offsets, key_offsets, most_queries: int, most_keys: int, scale: float,
    causal: bool = False, used_keys: torch.Tensor | None = None,
):
    """The variable-length FlashAttention call's contract, in plain torch: sequence s's queries
    `query[query_offsets[s]:query_offsets[s + 1]]` (tokens, heads, dim) attend over its keys and values alone,
    `key[key_offsets[s]:]`, the first `used_keys[s]` of them where given, else up to `key_offsets[s + 1]`; `causal`
    lets query i of n see the keys up to `keys - n + i`. Query heads share key/value heads in groups, as in
    `repeat_kv`. Returns the output like `query` and the float32 (heads, queries) log-sum-exps."""
    output = torch.empty_like(query)
    lse = torch.empty((query.shape[1], query.shape[0]), dtype=torch.float32, device=query.device)
    group = query.shape[1] // key.shape[1]
    q_bounds, k_bounds = query_offsets.tolist(), key_offsets.tolist()
    used = used_keys.tolist() if used_keys is not None else [end - start for start, end in zip(k_bounds, k_bounds[1:])]
    for q_start, q_end, k_start, length in zip(q_bounds, q_bounds[1:], k_bounds, used):
        keys = key[k_start : k_start + length].float().repeat_interleave(group, dim=1)
        values = value[k_start : k_start + length].float().repeat_interleave(group, dim=1)
        scores = torch.einsum("qhd,khd->hqk", query[q_start:q_end].float(), keys) * scale
        if causal:
            count = q_end - q_start
            late = torch.arange(length)[None, :] > torch.arange(count)[:, None] + (length - count)
            scores = scores.masked_fill(late.to(scores.device), float("-inf"))
        lse[:, q_start:q_end] = torch.logsumexp(scores, dim=-1)
        weights = torch.softmax(scores, dim=-1)
        output[q_start:q_end] = torch.einsum("hqk,khd->qhd", weights, values).to(query.dtype)
    return output, lse
