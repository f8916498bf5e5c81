"""How a shared-prefix decode step's queries attend over their prompt's prefix and their own suffix.

Every kernel computes the same attention: a row's queries score the prompt's prefix keys and the row's own
suffix keys, one softmax normalises both parts, and the weights mix both parts' values.

- `joint_softmax_attention` scores a prompt's K x group queries against the prefix in one matmul, concatenates
  the suffix scores and runs one float32 softmax. Every step writes and reads the (prompts, kv heads, K x group,
  width) scores several times.
- `flex_prefix_attention` reads the prefix with one FlexAttention kernel, which returns the prefix's own softmax
  output and its log-sum-exp; the small suffix part is scored as before, and the two parts are merged under
  their joint normaliser (`with_suffix`). On CUDA it runs FlexAttention through torch.compile (inside an already
  compiled forward it is traced with it). Elsewhere FlexAttention runs its eager reference, which materialises
  the scores again (torch's CPU kernel cannot return the log-sum-exp): correct, for tests, and not fast.
- `chunked_flash_attention` keeps the prefix packed without padding and cut into chunks, enough to occupy every
  multiprocessor even for one prompt (split-K, as flash-decoding does); one variable-length FlashAttention call
  attends each chunk with all its prompt's queries and returns each chunk's log-sum-exp, and the chunks are then
  merged like the suffix. In the decoder's steps a second such call reads each row's suffix, its written columns
  alone (`WrittenSuffix`, from token-major buffers), where the other kernels score every column of the decode
  budget under a mask. On CUDA in half precision it calls torch's FlashAttention kernel; elsewhere a plain
  torch reference of that call (`varlen_reference`), so the packing, the causal suffix and the merging are tested
  on the CPU.
- `split_flash_attention` (one prompt) reads the same packed prefix with one dense FlashAttention call, which for
  so few queries splits the keys across the multiprocessors and merges the splits in its own kernel; the suffix
  is read as `chunked_flash` reads it.
- `chunked_triton_attention` is `chunked_flash` with both variable-length calls by a Triton kernel
  (`triton_varlen.py`) whose query tiles are 16 to 128 rows, the query heads of a key/value head in one tile.
  FlashAttention computes tiles of 64 or 128 query rows however few a chunk has (16 for a MAGRPO buffer's 4
  candidates), most of them padding.
- `split_triton_attention` reads a step in two Triton launches per layer (`triton_split.py`): every prefix chunk
  and every row's written suffix attended by its own program, then one merge per row by the log-sum-exps, where the
  chunked kernels copy queries out and merge in a dozen small torch kernels.

Every kernel takes the same inputs: a step's queries per row (rows, key/value heads, group, head dim), rows
prompt-major with `repeats` candidates per prompt; the prompts' prefix keys and values (packed by `PrefixChunks` for
the chunked and split kernels, padded with a bias otherwise); each row's suffix keys and values (rows, key/value
heads, capacity, head dim) with the mask or `WrittenSuffix` lengths of the columns written so far. Each returns the
attention output in the queries' shape and dtype. `joint_softmax` and `split_triton` (`auto`'s picks with triton) are
here; the others are in travel/generation/kernels/prefix_kernels.py, loaded when chosen (`attention_kernel`).
`prefix_kernel` resolves `auto` for the device, dtype, rows and
prompts of a call. `bench/prefix_attention.py` times the kernels alone; docs/performance.md has the timings that
`auto` rests on.
"""

from __future__ import annotations

import importlib.util
from typing import Callable

import torch

from travel.generation.flash_calls import flash_attention_runs
from travel.generation.options import PREFIX_KERNELS
from travel.generation.prefix_merge import to_prompts, to_rows
from travel.generation.triton_split import split_triton_attention
from travel.generation.triton_varlen import triton_available


def prefix_kernel(
    name: str, device: torch.device | None = None, dtype: torch.dtype | None = None, rows: int = 1, prompts: int = 1
) -> str:
    """The kernel `name` asks for. `auto`, where torch's FlashAttention runs (a CUDA GPU of compute capability 8 or
    more, half precision), is `split_triton` where triton imports, for any rows and prompts; without triton
    `split_flash` for one prompt of several rows and `chunked_flash` for several prompts; the joint softmax
    otherwise (one row without triton, or no FlashAttention). The timings behind it: docs/performance.md."""
    if name not in PREFIX_KERNELS:
        raise ValueError(f"prefix_attention must be one of {', '.join(PREFIX_KERNELS)}; got {name!r}")
    if name == "flex" and importlib.util.find_spec("torch.nn.attention.flex_attention") is None:
        raise ValueError("prefix_attention='flex' needs torch >= 2.5 (torch.nn.attention.flex_attention)")
    if name in ("chunked_triton", "split_triton") and not triton_available():
        raise ValueError(f"prefix_attention={name!r} needs the triton package (pip install triton)")
    if name != "auto":
        return name
    if device is None or not flash_attention_runs(device, dtype):
        return "joint_softmax"
    if triton_available():
        return "split_triton"
    if rows > 1:
        return "split_flash" if prompts == 1 else "chunked_flash"
    return "joint_softmax"


def joint_softmax_attention(
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
    """Queries `per_row` (rows, kv heads, group, head dim), rows prompt-major; the prompts' (prompts, kv heads,
    width, head dim) prefix under its (prompts, 1, 1, width) additive bias; each row's (rows, kv heads, capacity,
    head dim) suffix under `suffix_mask` (rows, 1, group or 1, capacity). Returns (rows, kv heads, group, head dim)."""
    prompts, width = prefix_keys.shape[0], prefix_keys.shape[2]
    per_prompt = to_prompts(per_row, prompts, repeats)
    prefix_scores = torch.matmul(per_prompt, prefix_keys.transpose(-1, -2)).float() * scale + prefix_bias
    suffix_scores = torch.matmul(per_row, key.transpose(-1, -2)).float() * scale + suffix_mask
    suffix_scores = to_prompts(suffix_scores, prompts, repeats)
    weights = torch.softmax(torch.cat([prefix_scores, suffix_scores], dim=-1), dim=-1).to(value.dtype)
    from_prefix = torch.matmul(weights[..., :width], prefix_values)  # (prompts, kv heads, K x group, head dim)
    from_suffix = torch.matmul(to_rows(weights[..., width:], prompts, repeats), value)
    return to_rows(from_prefix, prompts, repeats) + from_suffix


DEFAULT_KERNELS = {"joint_softmax": joint_softmax_attention, "split_triton": split_triton_attention}  # CPU's and GPU's auto


def attention_kernel(name: str) -> Callable[..., torch.Tensor]:
    """The function of kernel `name`: the two `auto` picks from here, the others from
    travel/generation/kernels/prefix_kernels.py, imported only when one of them is asked for."""
    if name in DEFAULT_KERNELS:
        return DEFAULT_KERNELS[name]
    # deferred: the optional kernels load only where hardware.prefix_attention (or auto without triton) picks one
    from travel.generation.kernels import prefix_kernels

    return prefix_kernels.KERNELS[name]


PACKED_KERNELS = ("chunked_flash", "split_flash", "chunked_triton", "split_triton")  # the kernels over a packed prefix and token-major suffix buffers
