"""The shared-prefix decode attention in two Triton kernels: partial results by chunk and by suffix, then one merge
`prefix_attention='split_triton'`, which
`auto` picks wherever FlashAttention runs and triton imports.

`split_triton_attention` takes `chunked_flash_attention`'s contract (travel/generation/prefix_attention.py): queries
`per_row` (rows, key/value heads, group, head dim), rows prompt-major with `repeats` candidates per prompt, in half
precision with the head dim contiguous and a power of two of at least 16; the prompts' packed prefix keys and values
(tokens, key/value heads, head dim) cut into chunks by `PrefixChunks`; each row's suffix keys and values (rows,
key/value heads, capacity, head dim), read up to the row's written length (`WrittenSuffix`). It returns the attention
output in `per_row`'s shape and dtype: per row, one softmax over the prompt's prefix and the row's written suffix.
Unlike the chunked kernels, it reads the queries in place and merges in one kernel, not in a dozen torch kernels per
layer. A layer takes two launches:

1. `_partials_kernel`, one program per query tile of a unit and key/value head (`partials_grid`: the chunks' tiles,
   then the suffixes'; only programs that have work). A unit is a prefix chunk or a row's suffix.
   For a chunk, the queries of the chunk's prompt that use that key/value head (its K candidates x the group, read
   in place from the step's query tensor) attend the chunk's packed prefix keys; for a suffix, the row's queries
   attend its own written columns (causal to the written end). Each writes its output normalised over its keys, in
   the queries' dtype (as vLLM's split-KV kernel does), and the base-2 log-sum-exp in float32. A chunk's queries
   take tiles of at most `LARGEST_CHUNK_TILE` rows and a tail tile of the power of two that holds the rest
   (`chunk_tiles`: 20 candidates x 4 query heads compute 64 + 16 rows, not 128 with 48 of padding). Keys per block
   and warps depend on the candidate count (`partials_launch`).
2. `_merge_kernel`, program (query block of `merge_launch`'s rows, row, key/value head): the row's suffix part and its
   prompt's chunk parts under one normaliser, found from their log-sum-exps first; it writes the attention output.
   (Merging one candidate's row in the partials launch instead, by its last program, was slower: docs/performance.md.)

The chunks split the prefix's read across the multiprocessors (split-K, as flash-decoding does) for one prompt and
for many alike (`prefix_packing.prefix_chunks`: one wave of them for one prompt, at most `MAX_MERGED_CHUNKS`, which
the merge's unrolled loop holds without spilling registers).
Where the GPU has the tensor memory accelerator (compute capability 9.0 on; `PrefixChunks.tma`), the chunk programs
load their keys and values through two tensor descriptors of the packed prefix (`triton_varlen.attend_described_keys`),
so they compute no per-element addresses and hold fewer registers; elsewhere they load by pointers.
On CUDA in half precision the compiled kernels run (`triton_varlen.triton_runs`); under `TRITON_INTERPRET=1`
Triton's interpreter runs them on CPU tensors, which is how the CPU tests check them against the joint softmax.
Timings of each choice: docs/performance.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from travel.generation.triton_varlen import BLOCK_KEYS, LN2, TensorDescriptor, query_block, triton

if TYPE_CHECKING:
    from travel.generation.prefix_packing import PrefixChunks, WrittenSuffix

STAGES = 3  # software-pipelined key blocks in flight per program
SEVERAL_CANDIDATES_KEYS = 32  # keys per block where a prompt has several candidates (see partials_launch)
ONE_CANDIDATE_WARPS = 2  # warps of a program of 16 query rows of one prompt's one candidate (see partials_launch)
# the merge's query rows per program: a jump step's wider group (4 heads x its positions) in tiles of 32 rows or
# more spilled registers (ptxas for sm_90), 16 rows none at any group
MERGE_ROWS = 16
# a merge kernel's program: one warp for a tile of up to SMALL_MERGE_ROWS rows (a one-token step's 4 query heads),
# else MERGE_WARPS; the fastest of the tiles and warps measured (docs/performance.md)
SMALL_MERGE_ROWS = 4
MERGE_WARPS = 4
LARGEST_CHUNK_TILE = 64  # a chunk program's largest query tile (see chunk_tiles)

if triton is not None:
    import triton.language as tl

    # the online softmax the kernels below share, over keys by pointers or by tensor descriptors
    from travel.generation.triton_varlen import attend_described_keys, attend_keys

    def _chunk_part(Q, K, V, KD, VD, PART, PART_LSE, chunk_offsets, unit, kv_head, m, d,
                    stride_qr, stride_qh, stride_qg, stride_kt, stride_kh, stride_vt, stride_vh,
                    stride_pc, stride_ph, stride_pj, stride_lc, stride_lh, scale_log2, per_prompt, repeats,
                    GROUP: tl.constexpr, TILE_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                    DESCRIBED: tl.constexpr):
        """Prefix chunk `unit`'s queries `m` (a tile of TILE_M) of key/value head `kv_head`: query m of the chunk's
        prompt is row prompt x repeats + m // GROUP, group entry m % GROUP. Writes their part and log-sum-exp.
        DESCRIBED: the chunk's keys and values by the tensor descriptors KD/VD instead of pointers K/V."""
        valid = m < repeats * GROUP
        row = ((unit // per_prompt) * repeats + m // GROUP).to(tl.int64)
        q = tl.load(Q + row[:, None] * stride_qr + kv_head * stride_qh + (m % GROUP)[:, None] * stride_qg + d[None, :],
                    mask=valid[:, None], other=0.0)
        first = tl.load(chunk_offsets + unit)
        k_count = tl.load(chunk_offsets + unit + 1) - first
        if DESCRIBED:
            out, lse = attend_described_keys(q, KD, VD, first, k_count, kv_head * HEAD_DIM, scale_log2, TILE_M, BLOCK_N, HEAD_DIM)
        else:
            k_start = first.to(tl.int64)  # 64-bit: token x stride can pass 2**31
            out, lse = attend_keys(q, K + k_start * stride_kt + kv_head * stride_kh, V + k_start * stride_vt + kv_head * stride_vh,
                                   stride_kt, stride_vt, k_count, m, scale_log2, False, TILE_M, BLOCK_N, HEAD_DIM)
        tl.store(PART + unit * stride_pc + kv_head * stride_ph + m[:, None] * stride_pj + d[None, :],
                 out.to(PART.dtype.element_ty), mask=valid[:, None])
        tl.store(PART_LSE + unit * stride_lc + kv_head * stride_lh + m, lse, mask=valid)

    def _suffix_part(Q, SK, SV, SPART, SPART_LSE, lengths, row, kv_head, m, valid, d,
                     stride_qr, stride_qh, stride_qg, stride_skr, stride_skt, stride_skh, stride_svr, stride_svt,
                     stride_svh, stride_sr, stride_sh, stride_sg, stride_tr, stride_th, scale_log2,
                     POSITIONS: tl.constexpr, SUFFIX_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
        """Row `row`'s queries `m` of key/value head `kv_head` over its written suffix columns: its part and log-sum-exp."""
        q = tl.load(Q + row * stride_qr + kv_head * stride_qh + m[:, None] * stride_qg + d[None, :], mask=valid[:, None], other=0.0)
        length = tl.load(lengths + row)
        out, lse = attend_keys(q, SK + row * stride_skr + kv_head * stride_skh, SV + row * stride_svr + kv_head * stride_svh,
                                stride_skt, stride_svt, length, length - POSITIONS + m % POSITIONS, scale_log2,
                                True, SUFFIX_M, BLOCK_N, HEAD_DIM)
        tl.store(SPART + row * stride_sr + kv_head * stride_sh + m[:, None] * stride_sg + d[None, :],
                 out.to(SPART.dtype.element_ty), mask=valid[:, None])
        tl.store(SPART_LSE + row * stride_tr + kv_head * stride_th + m, lse, mask=valid)

    def _partials_kernel(
        Q, K, V, KD, VD, SK, SV, PART, PART_LSE, SPART, SPART_LSE, chunk_offsets, lengths,
        stride_qr, stride_qh, stride_qg, stride_kt, stride_kh, stride_vt, stride_vh,
        stride_skr, stride_skt, stride_skh, stride_svr, stride_svt, stride_svh,
        stride_pc, stride_ph, stride_pj, stride_lc, stride_lh, stride_sr, stride_sh, stride_sg, stride_tr, stride_th,
        scale_log2, chunk_count, repeats, full_blocks, kv_heads,
        GROUP: tl.constexpr, POSITIONS: tl.constexpr, BLOCK_M: tl.constexpr, TAIL_M: tl.constexpr, SUFFIX_M: tl.constexpr,
        BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, PER_PROMPT: tl.constexpr,
        SUFFIX_TILES: tl.constexpr, DESCRIBED: tl.constexpr,
    ):
        """One program per chunk tile (tile, chunk, key/value head), then one per suffix tile (tile, key/value head,
        row): a flat grid of the programs that have work (see `partials_grid`)."""
        program = tl.program_id(0)
        tiles = full_blocks + (TAIL_M > 0)
        chunk_programs = tiles * chunk_count * kv_heads
        d = tl.arange(0, HEAD_DIM)
        if program < chunk_programs:  # a prefix chunk: a full query tile, or the tail tile after them
            block = program % tiles
            unit = (program // tiles) % chunk_count
            kv_head = program // (tiles * chunk_count)
            if block < full_blocks:
                _chunk_part(Q, K, V, KD, VD, PART, PART_LSE, chunk_offsets, unit, kv_head, block * BLOCK_M + tl.arange(0, BLOCK_M), d,
                            stride_qr, stride_qh, stride_qg, stride_kt, stride_kh, stride_vt, stride_vh,
                            stride_pc, stride_ph, stride_pj, stride_lc, stride_lh, scale_log2, PER_PROMPT, repeats,
                            GROUP, BLOCK_M, BLOCK_N, HEAD_DIM, DESCRIBED)
            elif TAIL_M > 0:
                _chunk_part(Q, K, V, KD, VD, PART, PART_LSE, chunk_offsets, unit, kv_head, full_blocks * BLOCK_M + tl.arange(0, TAIL_M), d,
                            stride_qr, stride_qh, stride_qg, stride_kt, stride_kh, stride_vt, stride_vh,
                            stride_pc, stride_ph, stride_pj, stride_lc, stride_lh, scale_log2, PER_PROMPT, repeats,
                            GROUP, TAIL_M, BLOCK_N, HEAD_DIM, DESCRIBED)
        else:  # a tile of a row's suffix, in tiles of its own size (at most BLOCK_M): group entry m is query head
            # m // POSITIONS at new position m % POSITIONS, which sees the row's written columns up to its own
            # (causal, aligned to the written end)
            suffix = program - chunk_programs
            block = suffix % SUFFIX_TILES
            kv_head = (suffix // SUFFIX_TILES) % kv_heads
            row = suffix // (SUFFIX_TILES * kv_heads)
            m = block * SUFFIX_M + tl.arange(0, SUFFIX_M)
            _suffix_part(Q, SK, SV, SPART, SPART_LSE, lengths, row.to(tl.int64), kv_head, m, m < GROUP, d,
                         stride_qr, stride_qh, stride_qg, stride_skr, stride_skt, stride_skh, stride_svr, stride_svt,
                         stride_svh, stride_sr, stride_sh, stride_sg, stride_tr, stride_th, scale_log2,
                         POSITIONS, SUFFIX_M, BLOCK_N, HEAD_DIM)

    def _merge_rows(
        PART, PART_LSE, SPART, SPART_LSE, OUT, row, kv_head, g, repeats,
        stride_pc, stride_ph, stride_pj, stride_lc, stride_lh, stride_sr, stride_sh, stride_sg, stride_tr, stride_th,
        stride_or, stride_oh, stride_og,
        GROUP: tl.constexpr, PER_PROMPT: tl.constexpr, BLOCK_C: tl.constexpr, HEAD_DIM: tl.constexpr,
    ):
        """Row `row`'s queries `g` of key/value head `kv_head`: its suffix part and its prompt's chunk parts under one
        normaliser, found from their log-sum-exps first; writes the attention output. The parts are read past L1
        (`.cg`): the partials launch just wrote them."""
        valid = g < GROUP
        d = tl.arange(0, HEAD_DIM)
        prompt = row // repeats
        j = (row - prompt * repeats) * GROUP + g  # the row's queries among its prompt's
        suffix_lse = tl.load(SPART_LSE + row * stride_tr + kv_head * stride_th + g, mask=valid, other=0.0, cache_modifier=".cg")
        suffix = tl.load(SPART + row * stride_sr + kv_head * stride_sh + g[:, None] * stride_sg + d[None, :],
                         mask=valid[:, None], other=0.0, cache_modifier=".cg")
        # one maximum over the suffix and all the prompt's chunks first, so the unrolled loop's loads are independent
        first = PART_LSE + (prompt * PER_PROMPT) * stride_lc + kv_head * stride_lh
        c = tl.arange(0, BLOCK_C)
        lse = tl.load(first + c[:, None] * stride_lc + j[None, :], mask=(c[:, None] < PER_PROMPT) & valid[None, :],
                      other=float("-inf"), cache_modifier=".cg")
        top = tl.maximum(suffix_lse, tl.max(lse, 0))  # finite: every chunk has keys
        acc = suffix.to(tl.float32) * tl.exp2(suffix_lse - top)[:, None]
        total = tl.exp2(suffix_lse - top) + tl.sum(tl.exp2(lse - top[None, :]), 0)
        parts = PART + (prompt * PER_PROMPT) * stride_pc + kv_head * stride_ph + j[:, None] * stride_pj + d[None, :]
        for chunk in tl.static_range(PER_PROMPT):
            weight = tl.exp2(tl.load(first + chunk * stride_lc + j, mask=valid, other=0.0, cache_modifier=".cg") - top)
            acc += tl.load(parts + chunk * stride_pc, mask=valid[:, None], other=0.0, cache_modifier=".cg").to(tl.float32) * weight[:, None]
        out = OUT + row.to(tl.int64) * stride_or + kv_head * stride_oh + g[:, None] * stride_og + d[None, :]
        tl.store(out, (acc / total[:, None]).to(OUT.dtype.element_ty), mask=valid[:, None])

    def _merge_kernel(
        PART, PART_LSE, SPART, SPART_LSE, OUT,
        stride_pc, stride_ph, stride_pj, stride_lc, stride_lh, stride_sr, stride_sh, stride_sg, stride_tr, stride_th,
        stride_or, stride_oh, stride_og,
        repeats,
        GROUP: tl.constexpr, PER_PROMPT: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr,
    ):
        block, row, kv_head = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        _merge_rows(PART, PART_LSE, SPART, SPART_LSE, OUT, row, kv_head, block * BLOCK_M + tl.arange(0, BLOCK_M), repeats,
                    stride_pc, stride_ph, stride_pj, stride_lc, stride_lh, stride_sr, stride_sh, stride_sg, stride_tr,
                    stride_th, stride_or, stride_oh, stride_og, GROUP, PER_PROMPT, BLOCK_C, HEAD_DIM)

    _chunk_part = triton.jit(_chunk_part)
    _merge_rows = triton.jit(_merge_rows)
    _suffix_part = triton.jit(_suffix_part)
    _PARTIALS = triton.jit(_partials_kernel)
    _MERGE = triton.jit(_merge_kernel)


def chunk_tiles(queries: int, largest: int = LARGEST_CHUNK_TILE) -> tuple[int, int, int]:
    """A prompt's `queries` per key/value head in a chunk program's tiles: (rows of a full tile, full tiles, rows
    of the tail tile after them or 0). Up to `largest` queries take one tile of the power of two that holds them
    (`query_block`); more take full tiles of `largest` and the rest one tile of the power of two that holds it, so
    80 queries compute 64 + 16 rows instead of 128."""
    if queries <= largest:
        return query_block(queries), 1, 0
    rest = queries % largest
    return largest, queries // largest, query_block(rest) if rest else 0


def merge_launch(group: int) -> tuple[int, int]:
    """The merge's (query rows, warps) per program for a row's `group` queries per key/value head: the power of two
    that holds them, at most `MERGE_ROWS`, on one warp up to `SMALL_MERGE_ROWS` rows. The merge
    multiplies no tiles, so a one-token step's 4 query heads take 4 rows, not the 16 a product's tile would need."""
    rows = min(triton.next_power_of_2(group), MERGE_ROWS)
    return rows, 1 if rows <= SMALL_MERGE_ROWS else MERGE_WARPS


def partials_grid(chunk_count: int, rows: int, kv_heads: int, chunk_tiles: int, suffix_tiles: int) -> int:
    """The partials kernel's programs: `chunk_tiles` query tiles of every chunk and key/value head, then
    `suffix_tiles` of every row and key/value head. A grid of (tiles, units, heads) with the most tiles of either gave
    rows x key/value heads programs with nothing to do where a chunk has more tiles than a row's suffix (20 candidates:
    160 of 576), which cost time for no work."""
    return chunk_tiles * chunk_count * kv_heads + suffix_tiles * rows * kv_heads


def partials_launch(prompts: int, repeats: int, block: int) -> tuple[int, int]:
    """The partials kernel's (keys per block, warps) for `prompts` x `repeats` candidates and chunk tiles of `block`
    rows: `BLOCK_KEYS` keys and 4 warps (8 for a tile past 64 rows), but 2 warps for one prompt's one candidate in
    16-row tiles (a step of up to 4 positions) and `SEVERAL_CANDIDATES_KEYS` keys for several candidates: the fastest
    settings measured for each (docs/performance.md); several prompts of one candidate, not
    measured, keep 4 warps."""
    uniform = BLOCK_KEYS, 4 if block <= 64 else 8
    if repeats == 1:
        return (BLOCK_KEYS, ONE_CANDIDATE_WARPS) if prompts == 1 and block <= 16 else uniform
    return SEVERAL_CANDIDATES_KEYS, uniform[1]


def split_triton_attention(
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
    """`kernels.prefix_kernels.chunked_flash_attention`'s contract by the two kernels above: queries `per_row` (rows, kv
    heads, group, head dim), rows prompt-major, the head dim contiguous; the packed prefix (tokens, kv heads, head
    dim) cut by `chunks`; each row's suffix `key`/`value` (rows, kv heads, capacity, head dim), read up to its
    `written` length (the suffix mask is not read: the written lengths are what it opens)."""
    if triton is None:
        raise RuntimeError("prefix_attention='split_triton' needs the triton package (pip install triton)")
    if written is None:
        raise ValueError("prefix_attention='split_triton' reads each row's written suffix columns; this call gave no WrittenSuffix")
    rows, kv_heads, group, head_dim = per_row.shape
    if head_dim & (head_dim - 1) or head_dim < 16:
        raise ValueError(f"prefix_attention='split_triton' needs a head dim that is a power of two >= 16; got {head_dim}")
    for name, tensor in (("queries", per_row), ("prefix keys", prefix_keys), ("prefix values", prefix_values), ("keys", key), ("values", value)):
        if tensor.stride(-1) != 1:
            raise ValueError(f"prefix_attention='split_triton': the {name}' head dim must be contiguous")
    if rows != chunks.prompts * repeats:
        raise ValueError(f"prefix_attention='split_triton': {rows} query rows for {chunks.prompts} prompt(s) x {repeats} candidates")
    chunk_count = chunks.prompts * chunks.per_prompt
    queries = repeats * group  # a prompt's queries per key/value head
    part = per_row.new_empty((chunk_count, kv_heads, queries, head_dim))
    part_lse = torch.empty((chunk_count, kv_heads, queries), dtype=torch.float32, device=per_row.device)
    suffix = per_row.new_empty((rows, kv_heads, group, head_dim))
    suffix_lse = torch.empty((rows, kv_heads, group), dtype=torch.float32, device=per_row.device)
    output = torch.empty_like(per_row, memory_format=torch.contiguous_format)
    partial_strides = (*part.stride()[:3], *part_lse.stride()[:2], *suffix.stride()[:3], *suffix_lse.stride()[:2])
    block, full_blocks, tail = chunk_tiles(queries)
    block_keys, warps = partials_launch(chunks.prompts, repeats, block)
    suffix_block = min(query_block(group), block)
    suffix_tiles = -(-group // suffix_block)
    merge_block, merge_warps = merge_launch(group)
    described = chunks.tma and all(table.stride(1) == head_dim for table in (prefix_keys, prefix_values))
    if described:  # (tokens, kv heads x head dim) tables in blocks of a key block's rows x one head's entries
        key_table, value_table = (TensorDescriptor.from_tensor(table.flatten(1), [block_keys, head_dim])
                                  for table in (prefix_keys, prefix_values))
    else:
        key_table, value_table = prefix_keys, prefix_values  # (unread)
    constants = {"GROUP": group, "PER_PROMPT": chunks.per_prompt, "HEAD_DIM": head_dim}
    _PARTIALS[(partials_grid(chunk_count, rows, kv_heads, full_blocks + (tail > 0), suffix_tiles),)](
        per_row, prefix_keys, prefix_values, key_table, value_table, key, value, part, part_lse, suffix, suffix_lse, chunks.offsets, written.lengths,
        *per_row.stride()[:3], *prefix_keys.stride()[:2], *prefix_values.stride()[:2],
        key.stride(0), key.stride(2), key.stride(1), value.stride(0), value.stride(2), value.stride(1),
        *partial_strides,
        scale / LN2, chunk_count, repeats, full_blocks, kv_heads,
        POSITIONS=written.positions, BLOCK_M=block, TAIL_M=tail, SUFFIX_M=suffix_block, SUFFIX_TILES=suffix_tiles,
        BLOCK_N=block_keys, DESCRIBED=described, **constants,
        num_warps=warps, num_stages=STAGES,
    )
    _MERGE[(-(-group // merge_block), rows, kv_heads)](
        part, part_lse, suffix, suffix_lse, output, *partial_strides, *output.stride()[:3], repeats,
        BLOCK_M=merge_block, BLOCK_C=triton.next_power_of_2(chunks.per_prompt), **constants, num_warps=merge_warps,
    )
    return output
