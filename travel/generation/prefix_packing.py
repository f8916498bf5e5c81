"""How a shared-prefix decode step's packed kernels find their keys: the prompts' prefix packed without padding
and cut into chunks (`PrefixChunks`), and how far each row's suffix is written (`WrittenSuffix`).

The packed kernels of `prefix_attention.py` (`PACKED_KERNELS`) read the prefix as (tokens, kv heads, head dim),
every prompt's tokens back to back, and each row's suffix up to its written length alone.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from travel.generation.triton_varlen import tma_runs

MIN_CHUNK = 256  # tokens: the shortest chunk the default cuts (each chunk adds a partial result to merge)
# split_triton's merge unrolls over a prompt's chunks: from 18 on it spilled registers (ptxas for sm_90, 4 queries a
# program), which made the attention several times slower (docs/performance.md)
MAX_MERGED_CHUNKS = 16


@dataclass(frozen=True)
class PrefixChunks:
    """The chunked kernel's packing of the prefix: every prompt's tokens (its padding dropped) back to back,
    prompt-major, cut into `per_prompt` chunks of near-equal length; chunk c spans packed rows
    `offsets[c]:offsets[c + 1]`."""

    offsets: torch.Tensor  # (prompts x per_prompt + 1,) int32, on the prefix's device
    prompts: int
    per_prompt: int
    longest: int  # the most tokens in a chunk
    # whether split_triton loads the packed prefix through tensor descriptors (`triton_varlen.tma_runs` on its device)
    tma: bool = False


def prefix_chunks(
    attention: torch.Tensor, kv_heads: int, per_prompt: int | None = None, one_wave: bool = False,
    processors: int | None = None,
) -> PrefixChunks:
    """Chunks for the (prompts, width) prompt mask `attention`. By default enough chunks that prompts x chunks x
    `kv_heads` fills the GPU's `processors` (its multiprocessors; none off a GPU) about twice. With `one_wave` (for
    `split_triton`) one prompt's chunks fill them at most once (a second, partial wave of programs costs more than it
    splits), and no prompt has more than `MAX_MERGED_CHUNKS`. Each chunk has at least `MIN_CHUNK`
    tokens, none is empty, and without processors every prompt is one chunk."""
    lengths = attention.sum(dim=1).tolist()
    prompts = len(lengths)
    if per_prompt is None:
        if processors is None:
            processors = torch.cuda.get_device_properties(attention.device).multi_processor_count if attention.is_cuda else 0
        wanted = processors // kv_heads if one_wave and prompts == 1 else -(-2 * processors // (prompts * kv_heads))
        if one_wave:
            wanted = min(wanted, MAX_MERGED_CHUNKS)
        per_prompt = max(1, min(wanted if processors else 1, min(lengths) // MIN_CHUNK))
    if per_prompt < 1 or per_prompt > min(lengths):
        raise ValueError(f"prefix_chunks: per_prompt={per_prompt} must be between 1 and the shortest prompt ({min(lengths)})")
    sizes = [length // per_prompt + (c < length % per_prompt) for length in lengths for c in range(per_prompt)]
    offsets = torch.tensor([0, *itertools.accumulate(sizes)], dtype=torch.int32, device=attention.device)
    return PrefixChunks(offsets, prompts, per_prompt, max(sizes), tma_runs(attention.device))


def prompt_tokens(attention: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(prompt, column) of every token of the (prompts, width) prompt mask, prompt-major: what `pack_prefix`
    gathers, found once for all layers."""
    return attention.bool().nonzero(as_tuple=True)


def pack_prefix(tensor: torch.Tensor, tokens: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """(prompts, kv heads, width, head dim) prefix keys or values -> (tokens, kv heads, head dim), the prompts'
    unpadded tokens (`prompt_tokens`) back to back (`PrefixChunks`' packing)."""
    return tensor.transpose(1, 2)[tokens].contiguous()


@dataclass(frozen=True)
class WrittenSuffix:
    """How far each row's suffix is written, for a kernel that reads those columns alone: a row's `positions` new
    queries sit at its last `positions` written columns, so its query i sees columns 0 to `lengths - positions + i`
    (the causal mask aligned to the written end, as FlashAttention aligns it)."""

    lengths: torch.Tensor  # (rows,) int32, set in place by the step before each forward
    positions: int
    query_offsets: torch.Tensor  # (rows + 1,) int32: row r's queries start at r x positions
    key_offsets: torch.Tensor  # (rows + 1,) int32: row r's suffix columns start at r x capacity

    @classmethod
    def of(cls, lengths: torch.Tensor, positions: int, capacity: int) -> "WrittenSuffix":
        """The rows' written `lengths` with the call's offsets, made once for every layer and step."""
        rows, device = lengths.shape[0], lengths.device
        query_offsets = torch.arange(0, (rows + 1) * positions, positions, dtype=torch.int32, device=device)
        key_offsets = torch.arange(0, (rows + 1) * capacity, capacity, dtype=torch.int32, device=device)
        return cls(lengths, positions, query_offsets, key_offsets)
