"""The shared prefix's optional attention kernels: `flex`, `chunked_flash`, `split_flash` and `chunked_triton`
(travel/generation/prefix_attention.py describes each and holds the two that `auto` picks on the CPU and on a GPU
with triton: `joint_softmax` and `split_triton`). `prefix_attention.attention_kernel` imports this module only
when an option, or `auto` on a GPU without triton, selects one of them. Each takes `joint_softmax_attention`'s
contract, the packed ones over a packed prefix (`prefix_packing.PrefixChunks`) and, with `WrittenSuffix`, each
row's written suffix columns alone.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import torch

from travel.generation.flash_calls import dense_reference, flash_dense, flash_runs, flash_varlen, varlen_reference
from travel.generation.prefix_merge import to_prompts, to_rows, with_suffix
from travel.generation.prefix_packing import PrefixChunks, WrittenSuffix
from travel.generation.triton_varlen import triton_runs, triton_varlen

try:
    from torch.nn.attention.flex_attention import flex_attention
except ImportError:  # torch < 2.5
    flex_attention = None  # type: ignore[assignment]

_COMPILED_FLEX: Any = None


def flex_prefix_attention(
    per_row: torch.Tensor,
    prefix_keys: torch.Tensor,
    prefix_values: torch.Tensor,
    prefix_bias: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    suffix_mask: torch.Tensor,
    scale: float,
    repeats: int,
) -> torch.Tensor:
    """`joint_softmax_attention`'s contract, with the prefix read by one FlexAttention kernel."""
    prompts = prefix_keys.shape[0]
    bias = prefix_bias[:, 0, 0]  # (prompts, width)

    def padding(score: torch.Tensor, b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return score + bias[b, kv]

    attend = flex_attention if torch.compiler.is_compiling() or not per_row.is_cuda else _compiled_flex()
    from_prefix, prefix_lse = _flex_with_lse(attend, to_prompts(per_row, prompts, repeats), prefix_keys, prefix_values, padding, scale)
    from_prefix = to_rows(from_prefix, prompts, repeats).float()  # normalised over the prefix alone
    prefix_lse = to_rows(prefix_lse.unsqueeze(-1), prompts, repeats)  # (rows, kv heads, group, 1)
    return with_suffix(from_prefix, prefix_lse, per_row, key, value, suffix_mask, scale)


def _compiled_flex() -> Any:
    global _COMPILED_FLEX
    if _COMPILED_FLEX is None:
        _COMPILED_FLEX = torch.compile(flex_attention)
    return _COMPILED_FLEX


def _flex_with_lse(attend: Any, query, key, value, score_mod, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    if attend is flex_attention and not torch.compiler.is_compiling():
        with warnings.catch_warnings():  # the eager reference warns that it is not the fused kernel: known, see above
            warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
            return _flex_call(attend, query, key, value, score_mod, scale)
    return _flex_call(attend, query, key, value, score_mod, scale)


def _flex_call(attend: Any, query, key, value, score_mod, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    try:
        from torch.nn.attention.flex_attention import AuxRequest
    except ImportError:  # torch < 2.9 returns the log-sum-exp with return_lse
        return attend(query, key, value, score_mod=score_mod, scale=scale, return_lse=True)
    output, aux = attend(query, key, value, score_mod=score_mod, scale=scale, return_aux=AuxRequest(lse=True))
    return output, aux.lse


def chunked_flash_attention(
    per_row: torch.Tensor,
    prefix_keys: torch.Tensor,
    prefix_values: torch.Tensor,
    chunks: PrefixChunks,
    key: torch.Tensor,
    value: torch.Tensor,
    suffix_mask: torch.Tensor,
    scale: float,
    repeats: int,
    written: WrittenSuffix | None = None,
    triton: bool = False,
) -> torch.Tensor:
    """`joint_softmax_attention`'s contract over a packed prefix (`pack_prefix`, (tokens, kv heads, head dim)):
    every chunk of `chunks` is one sequence of a variable-length FlashAttention call, whose queries are all
    its prompt's K x group queries; the chunks' outputs are merged by their log-sum-exps, then with the suffix.
    With `written` the suffix is read by a second such call over each row's written columns alone
    (`written_suffix_attention`; `suffix_mask` is then not read). `triton` makes both calls `triton_varlen`'s
    (`chunked_triton`)."""
    prompts, per_prompt = chunks.prompts, chunks.per_prompt
    rows, kv_heads, group, head_dim = per_row.shape
    queries = repeats * group  # per prompt, per key/value head
    per_prompt_queries = to_prompts(per_row, prompts, repeats).transpose(1, 2)  # (prompts, K x group, kv heads, dim)
    chunk_queries = per_prompt_queries.unsqueeze(1).expand(prompts, per_prompt, queries, kv_heads, head_dim)
    chunk_queries = chunk_queries.reshape(prompts * per_prompt * queries, kv_heads, head_dim)
    query_offsets = torch.arange(0, (prompts * per_prompt + 1) * queries, queries, dtype=torch.int32, device=per_row.device)
    attend = varlen_call(per_row, triton)
    output, lse = attend(chunk_queries, prefix_keys, prefix_values, query_offsets, chunks.offsets, queries, chunks.longest, scale)
    output = output.view(prompts, per_prompt, queries, kv_heads, head_dim).float()
    lse = lse.view(kv_heads, prompts, per_prompt, queries).permute(1, 2, 3, 0)  # (prompts, chunks, K x group, kv heads)
    prefix_lse = torch.logsumexp(lse, dim=1)
    from_prefix = (output * torch.exp(lse - prefix_lse.unsqueeze(1)).unsqueeze(-1)).sum(dim=1)
    from_prefix = to_rows(from_prefix.transpose(1, 2), prompts, repeats)  # normalised over the prefix alone
    prefix_lse = to_rows(prefix_lse.transpose(1, 2).unsqueeze(-1), prompts, repeats)
    return merged_with_suffix(from_prefix, prefix_lse, per_row, key, value, suffix_mask, scale, written, triton)


# `chunked_flash_attention` with both variable-length calls by `triton_varlen` (query tiles of 16 to 128 rows, the
# query heads of a key/value head in one tile), where FlashAttention computes tiles of 64 or 128 query rows
chunked_triton_attention = functools.partial(chunked_flash_attention, triton=True)


def varlen_call(per_row: torch.Tensor, triton: bool) -> Any:
    """The variable-length attention call for queries like `per_row`: `triton_varlen` (asked for, and where it
    runs), torch's FlashAttention (where it runs), else their plain-torch reference."""
    if triton and triton_runs(per_row):
        return triton_varlen
    return flash_varlen if not triton and flash_runs(per_row) else varlen_reference


def split_flash_attention(
    per_row: torch.Tensor,
    prefix_keys: torch.Tensor,
    prefix_values: torch.Tensor,
    chunks: PrefixChunks,
    key: torch.Tensor,
    value: torch.Tensor,
    suffix_mask: torch.Tensor | None,
    scale: float,
    repeats: int,
    written: WrittenSuffix | None = None,
) -> torch.Tensor:
    """`chunked_flash_attention`'s contract for one prompt (`chunks.prompts == 1`; its chunking is not used): the
    packed prefix is one sequence of a dense FlashAttention call whose queries, per key/value head, are the
    prompt's K x group queries. For so few queries that kernel splits the keys across the multiprocessors itself
    and merges the splits in its own kernel (split-KV, as flash-decoding does), where `chunked_flash` cuts the
    chunks as sequences of a variable-length call and merges them in torch. Elsewhere `varlen_reference` runs."""
    if chunks.prompts != 1:
        raise ValueError(f"prefix_attention='split_flash' attends one prompt's prefix; this step has {chunks.prompts}")
    queries = to_prompts(per_row, 1, repeats).transpose(1, 2)  # (1, K x group, kv heads, dim)
    attend = flash_dense if flash_runs(per_row) else dense_reference
    output, lse = attend(queries, prefix_keys[None], prefix_values[None], scale)  # (1, queries, kv heads, dim), (1, kv heads, queries)
    from_prefix = to_rows(output.transpose(1, 2).float(), 1, repeats)  # normalised over the prefix alone
    prefix_lse = to_rows(lse.unsqueeze(-1), 1, repeats)
    return merged_with_suffix(from_prefix, prefix_lse, per_row, key, value, suffix_mask, scale, written)


def merged_with_suffix(
    from_prefix, prefix_lse, per_row, key, value, suffix_mask, scale: float, written, triton: bool = False
) -> torch.Tensor:
    """The packed kernels' prefix part merged with the suffix: `with_suffix` over the mask, or with `written` the
    rows' written columns alone (`written_suffix_attention`, by `triton_varlen` with `triton`), under the joint
    normaliser."""
    if written is None:
        return with_suffix(from_prefix, prefix_lse, per_row, key, value, suffix_mask, scale)
    from_suffix, suffix_lse = written_suffix_attention(per_row, key, value, written, scale, triton)
    total = torch.logaddexp(prefix_lse, suffix_lse)
    output = from_prefix * torch.exp(prefix_lse - total) + from_suffix.float() * torch.exp(suffix_lse - total)
    return output.to(value.dtype)


def written_suffix_attention(
    per_row: torch.Tensor, key: torch.Tensor, value: torch.Tensor, written: WrittenSuffix, scale: float, triton: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows' attention over their own written suffix columns alone, by one variable-length FlashAttention call
    (a sequence per row, the causal mask of `WrittenSuffix`), unlike `with_suffix`, which scores every column of
    the capacity. `key` and `value` (rows, kv heads, capacity, head dim) should be views of (rows, capacity, kv
    heads, head dim) storage (`shared_prefix.split_prefix` lays them so), else the call copies them. Returns the
    output like `per_row`, normalised over the suffix alone, and its (rows, kv heads, group, 1) log-sum-exp."""
    rows, kv_heads, group, head_dim = per_row.shape
    positions, capacity = written.positions, key.shape[2]
    per_kv = group // positions  # query heads per key/value head: group is (query head, position), position minor
    queries = per_row.view(rows, kv_heads, per_kv, positions, head_dim).permute(0, 3, 1, 2, 4)
    queries = queries.reshape(rows * positions, kv_heads * per_kv, head_dim)  # FlashAttention's grouped-query layout
    keys = key.transpose(1, 2).reshape(rows * capacity, kv_heads, head_dim)
    values = value.transpose(1, 2).reshape(rows * capacity, kv_heads, head_dim)
    attend = varlen_call(per_row, triton)
    output, lse = attend(
        queries, keys, values, written.query_offsets, written.key_offsets, positions, capacity, scale, True, written.lengths
    )
    output = output.view(rows, positions, kv_heads, per_kv, head_dim).permute(0, 2, 3, 1, 4).reshape(per_row.shape)
    lse = lse.view(kv_heads, per_kv, rows, positions).permute(2, 0, 1, 3).reshape(rows, kv_heads, group, 1)
    return output, lse


KERNELS = {
    "flex": flex_prefix_attention,
    "chunked_flash": chunked_flash_attention,
    "split_flash": split_flash_attention,
    "chunked_triton": chunked_triton_attention,
}
