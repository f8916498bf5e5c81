"""Top-p's threshold without a sort: a radix search over the scores' order keys, in Triton.

`sampling.top_p_filter` keeps every token whose higher-scored tokens hold less than top_p of the probability, which
is every token scored at or above one threshold per row. The sort that found it (torch.sort of a 151,936-token row)
took 0.18 ms of a 20-candidate decode step on an H200, more than any other kernel of the token choice. The threshold
is found here by eight passes over the row instead, each of which fixes four more bits of the threshold's key:

- A score's key is its float32 bits as an unsigned integer that orders as the floats do (`_order_key`), so
  the threshold is the smallest key whose higher-keyed tokens weigh less than top_p of the row's mass.
- Pass `p` weighs, in 16 bins by the key's next four bits, the tokens whose higher bits equal the bits fixed
  so far: program (row, chunk) sums its chunk's weights `exp(score - row maximum)` per bin. The row's last
  program to finish (an atomic counter, as `triton_split.py`'s merge does) adds the chunks' bins in chunk order
  and takes the lowest bin whose higher bins, plus the mass above the bins, still weigh less than top_p.
- The first pass finds the row's maximum as it goes (each chunk rescales its bins to its running maximum, the
  last program to the row's), and its bins sum to the row's mass.

Sums are float32 in a fixed order, so the threshold is the same on every call; it can differ from the CPU path's
(a sort and a cumulative sum, `sampling.top_p_threshold`) only where a token's mass above sits within float32
rounding of top_p. On an H200 the eight launches replace the sort, the softmax and the cumulative sum in sorted
order and the scatter back (docs/performance.md has the timings). The kernel runs on CUDA tensors
(`nucleus_threshold_runs`); with `TRITON_INTERPRET=1` Triton's interpreter runs it on CPU tensors, which is how
the CPU tests check it against the sort.
"""

from __future__ import annotations

import torch

from travel.generation.triton_varlen import triton

ENABLED = True  # False: the sort instead (bench/generation.py's +sort_nucleus, the A/B of docs/performance.md)
DIGIT_BITS = 4  # bits of the key fixed per pass: 16 bins, eight passes
BLOCK = 1024  # tokens per load of a program's chunk
PROGRAMS = 256  # about how many programs a pass runs over all rows (two per multiprocessor)
MOST_CHUNKS = 64

if triton is not None:
    import triton.language as tl

    @triton.jit
    def _order_key(score):
        """float32 -> uint32 that orders as the floats do (-0.0 taken as +0.0)."""
        bits = tl.where(score == 0.0, 0.0, score).to(tl.uint32, bitcast=True)
        return tl.where((bits >> 31) != 0, ~bits, bits | 0x80000000)

    @triton.jit
    def _nucleus_pass_kernel(
        SCORES, width, stride_row, top_p, MAXIMUM, MASS, PREFIX, ABOVE, BINS, COUNTERS, THRESHOLD,
        SHIFT: tl.constexpr, CHUNKS: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr,
    ):
        """Program (row, chunk) of the pass that fixes the key's bits SHIFT..SHIFT+3 (the first pass: SHIFT 28)."""
        row = tl.program_id(0)
        chunk = tl.program_id(1)
        FIRST: tl.constexpr = SHIFT + 4 >= 32
        source = SCORES + row.to(tl.int64) * stride_row
        digits = tl.arange(0, 16)
        bins = tl.zeros([16], tl.float32)
        if FIRST:
            maximum = float("-inf")
        else:
            maximum = tl.load(MAXIMUM + row)
            prefix = tl.load(PREFIX + row).to(tl.uint32, bitcast=True)
        for start in range(chunk * CHUNK, chunk * CHUNK + CHUNK, BLOCK):
            offsets = start + tl.arange(0, BLOCK)
            score = tl.load(source + offsets, mask=offsets < width, other=float("-inf"))
            key = _order_key(score)
            if FIRST:
                block_max = tl.maximum(maximum, tl.max(score, 0))
                bins = bins * tl.where(block_max > float("-inf"), tl.exp(maximum - block_max), 1.0)  # to the new maximum
                maximum = block_max
                inside = score > float("-inf")
            else:
                inside = ((key >> (SHIFT + 4)) == (prefix >> (SHIFT + 4))) & (score > float("-inf"))
            weight = tl.where(inside, tl.exp(score - maximum), 0.0)
            digit = ((key >> SHIFT) & 15).to(tl.int32)
            bins += tl.sum(tl.where(digit[:, None] == digits[None, :], weight[:, None], 0.0), 0)
        part = row * CHUNKS + chunk
        tl.store(BINS + part * 16 + digits, bins)
        if FIRST:
            tl.store(MAXIMUM + tl.num_programs(0) + part, maximum)  # the chunk's maximum, after the rows'
        tl.debug_barrier()  # every thread's stores land before the counter says so
        finished = tl.atomic_add(COUNTERS + row, 1, sem="acq_rel")
        if finished == CHUNKS - 1:  # the row's last program: add the chunks' bins and fix the digit
            chunks = tl.arange(0, CHUNKS)
            parts = tl.load(BINS + (row * CHUNKS + chunks[:, None]) * 16 + digits[None, :], volatile=True)
            if FIRST:
                maxima = tl.load(MAXIMUM + tl.num_programs(0) + row * CHUNKS + chunks, volatile=True)
                row_max = tl.max(maxima, 0)
                scale = tl.where(maxima > float("-inf"), tl.exp(maxima - row_max), 0.0)
                total = tl.sum(parts * scale[:, None], 0)
                mass = tl.sum(total, 0)
                tl.store(MAXIMUM + row, row_max)
                tl.store(MASS + row, mass)
                above = 0.0
                prefix = tl.zeros([], tl.uint32)
            else:
                total = tl.sum(parts, 0)
                mass = tl.load(MASS + row)
                above = tl.load(ABOVE + row)
            higher = above + tl.sum(tl.where(digits[None, :] > digits[:, None], total[None, :], 0.0), 1)
            chosen = tl.min(tl.where(higher < top_p * mass, digits, 15), 0)  # 15 where none is (no mass)
            prefix = prefix | (chosen.to(tl.uint32) << SHIFT)
            tl.store(PREFIX + row, prefix.to(tl.int32, bitcast=True))
            tl.store(ABOVE + row, tl.sum(tl.where(digits == chosen, higher, 0.0), 0))
            if SHIFT == 0:
                bits = tl.where((prefix >> 31) != 0, prefix & 0x7FFFFFFF, ~prefix)
                threshold = tl.where(mass > 0.0, bits.to(tl.float32, bitcast=True), float("-inf"))
                tl.store(THRESHOLD + row, threshold)
            tl.store(COUNTERS + row, 0)  # ready for the next pass


def nucleus_threshold_runs(scores: torch.Tensor) -> bool:
    """Whether the kernel finds the threshold of `scores`: float32 on a GPU. Tensor attributes alone, which
    torch.compile reads as constants of the step."""
    return ENABLED and triton is not None and scores.is_cuda and scores.dtype == torch.float32


def chunks_per_row(rows: int) -> int:
    """Programs per row of a pass: about `PROGRAMS` in all, a power of two, at most `MOST_CHUNKS`."""
    return max(1, min(MOST_CHUNKS, triton.next_power_of_2(max(1, PROGRAMS // rows))))


def nucleus_threshold(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """(rows,) float32: each row's lowest score that top-p keeps (-inf for a row with no finite score), for
    (rows, width) float32 `scores` whose last dim is contiguous. A row keeps `scores >= threshold`."""
    if triton is None:
        raise RuntimeError("nucleus_threshold needs the triton package (pip install triton)")
    if scores.dim() != 2 or scores.dtype != torch.float32 or scores.stride(-1) != 1:
        raise ValueError(f"nucleus_threshold: scores must be (rows, width) float32 with a contiguous last dim, "
                         f"got {tuple(scores.shape)} {scores.dtype} strides {scores.stride()}")
    rows, width = scores.shape
    chunks = chunks_per_row(rows)
    chunk = triton.cdiv(triton.cdiv(width, chunks), BLOCK) * BLOCK
    maximum = scores.new_empty(rows + rows * chunks)  # the rows' maxima, then the first pass's per chunk
    mass, above, threshold = (scores.new_empty(rows) for _ in range(3))
    prefix = torch.empty(rows, dtype=torch.int32, device=scores.device)  # the key's bits fixed so far
    bins = scores.new_empty(rows * chunks * 16)
    counters = torch.zeros(rows, dtype=torch.int32, device=scores.device)
    for shift in range(32 - DIGIT_BITS, -1, -DIGIT_BITS):
        _nucleus_pass_kernel[(rows, chunks)](
            scores, width, scores.stride(0), top_p, maximum, mass, prefix, above, bins, counters, threshold,
            SHIFT=shift, CHUNKS=chunks, CHUNK=chunk, BLOCK=BLOCK, num_warps=4,
        )
    return threshold
