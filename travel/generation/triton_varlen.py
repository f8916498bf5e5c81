"""A variable-length attention call for decode steps, written in Triton: `flash_varlen`'s contract, small query tiles.

torch's FlashAttention kernel tiles a sequence's queries in blocks of 64 or 128 rows. A decode step has few queries
per sequence: a chunk of a MAGRPO buffer's prompt has its 4 candidates x 4 query heads of a key/value head (16), a
row's suffix 4 (one new token). The kernel computes the whole tile anyway, so most of its arithmetic is on padding,
where a decode step need do little more than read the keys and values once.

`triton_varlen` tiles a sequence's queries in blocks of 16 to 128 rows, as few as hold them, and puts the query
heads that share a key/value head into the same tile, so every program reads its key/value head's keys once for
all of them. Program (sequence, key/value head, query block) runs the online softmax over its keys in blocks of
`BLOCK_KEYS` (`attend_keys`, a device function that `triton_split.py`'s kernels call too) and writes the output
normalised over its keys and their log-sum-exp, as FlashAttention does; the callers (`prefix_attention.py`) merge
chunks and the suffix by those log-sum-exps. It takes `flash_varlen`'s arguments (packed queries (tokens, heads, head dim),
keys and values (keys, key/value heads, head dim), each sequence's query and key offsets and used keys, causal or not)
and returns the output like the queries with float32 (heads, tokens) log-sum-exps. At a MAGRPO buffer's shape it is much faster than
FlashAttention's calls (`chunked_triton` against `chunked_flash` in docs/performance.md).

On CUDA the compiled kernel runs, in half precision (float32 inputs would take TF32 products there), as
`triton_runs` says. With `TRITON_INTERPRET=1` set before triton is imported, Triton's interpreter runs the same kernel
code on CPU tensors, which is how the CPU tests check it (slowly; its bfloat16 is not exact, so they use float32 and
float16). Needs the `triton` package; `triton_available()` says whether it imports.
"""

from __future__ import annotations

import math

import torch

from travel.generation.flash_calls import flash_runs

try:
    import triton
    import triton.language as tl
except ImportError:  # the kernel is then not offered (prefix_attention.prefix_kernel says so)
    triton = None  # type: ignore[assignment]
try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # a triton without host-side tensor descriptors: the kernels read by pointers alone
    TensorDescriptor = None  # type: ignore[assignment,misc]

BLOCK_KEYS = 64  # keys per inner-loop block
LN2 = math.log(2.0)


def triton_available() -> bool:
    return triton is not None


def triton_runs(tensor: torch.Tensor) -> bool:
    """Whether `triton_varlen` runs on `tensor`: half precision on a GPU, or any tensor where Triton's interpreter
    is on (`TRITON_INTERPRET=1` before triton is imported: what the CPU tests set). Tensor attributes alone and a
    constant, which torch.compile traces without a graph break."""
    if triton is None:
        return False
    return _INTERPRETING or flash_runs(tensor)  # the same inputs as FlashAttention's on a GPU


if triton is not None:

    # Device functions, inlined into the kernels that call them. Each is defined under the name they call it by:
    # torch.compile re-emits a kernel's source with the `def` of each device function it calls.
    @triton.jit
    def softmax_start(BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr):
        """The online softmax before any key: running maximum -inf, normaliser and output zero."""
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        return m_i, tl.zeros([BLOCK_M], tl.float32), tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)

    @triton.jit
    def softmax_block(q, k, v, keep, m_i, l_i, acc, scale_log2):
        """One block of keys `k` (head dim, keys) and values `v` (keys, head dim) into the online softmax of queries
        `q`: the running maximum `m_i`, normaliser `l_i` and output `acc` after it, base-2 logits, the keys outside
        `keep` (queries, keys) hidden."""
        scores = (tl.dot(q, k) * scale_log2).to(tl.float32)  # base-2 logits; a compiled caller passes a float64 scale
        scores = tl.where(keep, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a query that has seen no key yet
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(scores - m_safe[:, None])
        return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)

    @triton.jit
    def attend_keys(q, keys, values, stride_kt, stride_vt, k_count, last_key, scale_log2,
                    CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
        """Queries `q` (BLOCK_M, HEAD_DIM) over `k_count` keys and values from `keys`/`values` (one key/value head,
        `stride_kt` apart): the online softmax's output normalised over them and its base-2 log-sum-exp (-inf, with
        a zero output, for a query that sees no key). `CAUSAL` hides the keys past `last_key` (BLOCK_M,)."""
        d = tl.arange(0, HEAD_DIM)
        m_i, l_i, acc = softmax_start(BLOCK_M, HEAD_DIM)
        for n0 in range(0, k_count, BLOCK_N):
            n = n0 + tl.arange(0, BLOCK_N)
            in_range = n < k_count
            k = tl.load(keys + n[None, :].to(tl.int64) * stride_kt + d[:, None], mask=in_range[None, :], other=0.0)
            keep = in_range[None, :]
            if CAUSAL:
                keep = keep & (n[None, :] <= last_key[:, None])
            v = tl.load(values + n[:, None].to(tl.int64) * stride_vt + d[None, :], mask=in_range[:, None], other=0.0)
            m_i, l_i, acc = softmax_block(q, k, v, keep, m_i, l_i, acc, scale_log2)
        return softmax_result(m_i, l_i, acc)

    @triton.jit
    def attend_described_keys(q, key_table, value_table, k_start, k_count, column, scale_log2,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
        """`attend_keys` without a mask, its keys and values rows `k_start` to `k_start + k_count` of the tensor
        descriptors `key_table`/`value_table` ((tokens, kv heads x head dim) in blocks of (BLOCK_N, HEAD_DIM)), the
        key/value head's entries from `column`. The copy engine (TMA) loads each block, so the program computes no
        per-element addresses; rows past `k_count` are loaded (another chunk's, or zeros past the table) and hidden."""
        m_i, l_i, acc = softmax_start(BLOCK_M, HEAD_DIM)
        for n0 in range(0, k_count, BLOCK_N):
            keep = (n0 + tl.arange(0, BLOCK_N) < k_count)[None, :]
            k = key_table.load([k_start + n0, column])
            v = value_table.load([k_start + n0, column])
            m_i, l_i, acc = softmax_block(q, tl.trans(k), v, keep, m_i, l_i, acc, scale_log2)
        return softmax_result(m_i, l_i, acc)

    @triton.jit
    def softmax_result(m_i, l_i, acc):
        """The online softmax's output normalised over its keys and its base-2 log-sum-exp (-inf, with a zero output,
        for a query that saw no key)."""
        seen = l_i > 0
        l_safe = tl.where(seen, l_i, 1.0)
        return acc / l_safe[:, None], tl.where(seen, m_i + tl.log2(l_safe), float("-inf"))

    def _varlen_attention_kernel(
        Q, K, V, O, LSE, query_offsets, key_offsets, used_keys,
        stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh, stride_lh,
        scale_log2,
        GROUP: tl.constexpr, CAUSAL: tl.constexpr, USED: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
    ):
        sequence, kv_head, block = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        q_start = tl.load(query_offsets + sequence)
        q_count = tl.load(query_offsets + sequence + 1) - q_start
        k_start = tl.load(key_offsets + sequence)
        if USED:
            k_count = tl.load(used_keys + sequence)
        else:
            k_count = tl.load(key_offsets + sequence + 1) - k_start
        # tile row m is query token m // GROUP of the sequence, query head kv_head x GROUP + m % GROUP
        m = block * BLOCK_M + tl.arange(0, BLOCK_M)
        token, head = m // GROUP, kv_head * GROUP + m % GROUP
        valid = token < q_count
        d = tl.arange(0, HEAD_DIM)
        rows = (q_start + token).to(tl.int64)  # 64-bit offsets: token x stride can pass 2**31 for long packed prefixes
        q = tl.load(Q + rows[:, None] * stride_qt + head[:, None] * stride_qh + d[None, :], mask=valid[:, None], other=0.0)
        last_key = k_count - q_count + token  # causal: query i of n sees the keys up to keys - n + i
        start = k_start.to(tl.int64)
        out, lse = attend_keys(q, K + start * stride_kt + kv_head * stride_kh, V + start * stride_vt + kv_head * stride_vh,
                               stride_kt, stride_vt, k_count, last_key, scale_log2, CAUSAL, BLOCK_M, BLOCK_N, HEAD_DIM)
        tl.store(O + rows[:, None] * stride_ot + head[:, None] * stride_oh + d[None, :], out.to(O.dtype.element_ty), mask=valid[:, None])
        tl.store(LSE + head * stride_lh + rows, lse * 0.6931471805599453, mask=valid)  # base 2 to natural

    _KERNEL = triton.jit(_varlen_attention_kernel)
    _INTERPRETING = not isinstance(_KERNEL, triton.JITFunction)  # triton.jit gave the interpreter's function


def tma_runs(device: torch.device) -> bool:
    """Whether the kernels can load tiles through tensor descriptors on `device`: a GPU with the tensor memory
    accelerator (compute capability 9.0 or later), or Triton's interpreter on the CPU. Asked outside compiled code."""
    if triton is None or TensorDescriptor is None:
        return False
    if device.type == "cuda":
        return torch.cuda.get_device_capability(device) >= (9, 0)
    return _INTERPRETING


def query_block(queries: int) -> int:
    """Tile rows for `queries` (tokens x grouped heads) per sequence: the power of two of 16 to 128 that holds them,
    or 128 rows per program when there are more. Comparisons alone, which torch.compile guards on dynamic sizes."""
    block = 16
    while block < queries and block < 128:
        block *= 2
    return block


def triton_varlen(
    query, key, value, query_offsets, key_offsets, most_queries: int, most_keys: int, scale: float,
    causal: bool = False, used_keys: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`flash_calls.varlen_reference`'s contract: query (tokens, heads, dim), key and value (keys, kv heads, dim) with
    any strides between tokens and heads (the head dim contiguous); sequence s's queries
    `query_offsets[s]:query_offsets[s + 1]` attend its keys from `key_offsets[s]`, the first `used_keys[s]` where
    given; `causal` aligns the mask to the keys' end. Returns the output like `query` and float32 (heads, tokens)
    log-sum-exps (-inf, with a zero output, for a query that sees no key). `most_keys` is not needed here."""
    if triton is None:
        raise RuntimeError("prefix_attention='chunked_triton' needs the triton package")
    tokens, heads, dim = query.shape
    kv_heads = key.shape[1]
    if heads % kv_heads or dim & (dim - 1) or dim < 16:
        raise ValueError(f"triton_varlen: {heads} query heads over {kv_heads} key/value heads of dim {dim} (needs a power of two >= 16)")
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if tensor.stride(-1) != 1:
            raise ValueError(f"triton_varlen: {name}'s head dim must be contiguous")
    group = heads // kv_heads
    output = torch.empty_like(query)
    lse = torch.empty((heads, tokens), dtype=torch.float32, device=query.device)
    sequences = query_offsets.shape[0] - 1
    block = query_block(most_queries * group)
    grid = (sequences, kv_heads, -(-most_queries * group // block))
    used = used_keys if used_keys is not None else key_offsets
    _KERNEL[grid](
        query, key, value, output, lse, query_offsets, key_offsets, used,
        query.stride(0), query.stride(1), key.stride(0), key.stride(1), value.stride(0), value.stride(1),
        output.stride(0), output.stride(1), lse.stride(0),
        scale / LN2,
        GROUP=group, CAUSAL=causal, USED=used_keys is not None, BLOCK_M=block, BLOCK_N=BLOCK_KEYS, HEAD_DIM=dim,
        num_warps=4 if block <= 64 else 8, num_stages=3,
    )
    return output, lse
