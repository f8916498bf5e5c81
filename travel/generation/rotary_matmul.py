"""A decode step's q/k/v matmul with the rotary kernel's work in its own launch: the product, each head's q/k norm,
the rotary embedding and the cache writes of the step's keys and values.

Between a decode layer's q/k/v matmul (the split-K kernel of travel/generation/skinny_matmul.py, one slice) and its
attention, the rotary kernel (travel/generation/triton_rotary.py) read the product back to normalise and rotate each
head's queries and key and to write the key and the value into the cache: a launch of about 4 us for a few kilobytes
(H100, 20 candidates), 36 times a step. Here the matmul's programs do that work. Program `block` computes
`BLOCK_N` columns of the product (`transposed_product`), a part of one head, since the block divides the head dim:

- a value head's part goes straight into the cache columns the step writes;
- a query or key head's part is stored to the product, and the head's program that finishes last (a counter per
  head, which it resets for the next call) reads the head whole, the other parts being visible to it as the split-K
  kernel's slices are to its last program, and normalises, rotates and writes it (`_rotated`, the rotary kernel's
  arithmetic) to the queries or to the cache's keys.

The product is rounded to its dtype first, as the matmul writes it, so the queries, keys and values equal those of
the matmul followed by the rotary kernel bit for bit. `qkv_rotary_runs` says where it runs: the rotary kernel's
conditions (half precision on a GPU) and the split-K kernel's (a plan, at most `MAX_ROWS` tokens); jump steps of
more tokens run the two kernels. Under `TRITON_INTERPRET=1` Triton's interpreter runs it on CPU tensors, which is
how the CPU tests check it against the two kernels and the model.
"""

from __future__ import annotations

from typing import Any

import torch

from travel.generation.skinny_matmul import BLOCK_K, BLOCK_N, MAX_ROWS, SplitPlan, split_k_runs
from travel.generation.triton_varlen import triton

ENABLED = True  # False: the matmul, then the rotary kernel (bench/generation.py's +separate_rotary)

if triton is not None:
    import triton.language as tl

    # called by these names, under which torch.compile re-emits them with the kernel
    from travel.generation.skinny_matmul import transposed_product
    from travel.generation.triton_rotary import _rotated

    @triton.jit
    def _qkv_rotary_kernel(
        X, W, BIAS, OUT, COUNTS, Q_WEIGHT, K_WEIGHT, COS, SIN, COLUMNS, QUERY, KEYS, VALUES,
        rows, columns, inner, eps, q_eps, k_eps, stride_xr, stride_wn, stride_or,
        stride_cr, stride_ci, stride_sr, stride_si, stride_wr, stride_wi,
        stride_kr, stride_kc, stride_kh, stride_vr, stride_vc, stride_vh, POSITIONS,
        HAS_BIAS: tl.constexpr, NORMED: tl.constexpr, QK_NORMED: tl.constexpr, HEADS: tl.constexpr,
        KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr, INNER: tl.constexpr,
    ):
        """Program `block`: columns block x BLOCK_N on of X (tokens, inner) times W (columns, inner), X's rows
        RMS-normalised first where NORMED (the norm's weight folded into W), plus BIAS. Token m is position
        m % POSITIONS of row m // POSITIONS; its key and value go to cache column COLUMNS[row, position], its query
        heads to QUERY (rows, HEADS, POSITIONS, HEAD_DIM); q/k norms of weights Q_WEIGHT/K_WEIGHT where QK_NORMED."""
        block = tl.program_id(0)
        n = block * BLOCK_N + tl.arange(0, BLOCK_N)
        m = tl.arange(0, BLOCK_M)
        acc = transposed_product(X, W, rows, columns, inner, eps, stride_xr, stride_wn, n, m, 0, INNER, NORMED,
                                 BLOCK_M, BLOCK_N, BLOCK_K)
        if HAS_BIAS:
            acc += tl.load(BIAS + n).to(tl.float32)[:, None]
        product = acc.to(OUT.dtype.element_ty)  # the matmul's output, rounded once
        valid = m < rows
        row, position = m // POSITIONS, m % POSITIONS
        column = tl.load(COLUMNS + row * stride_wr + position * stride_wi, mask=valid, other=0).to(tl.int64)
        head = block * BLOCK_N // HEAD_DIM
        if head >= HEADS + KV_HEADS:  # a value head's part: into the cache as it is
            entry = n - head * HEAD_DIM
            values = VALUES + row.to(tl.int64)[None, :] * stride_vr + column[None, :] * stride_vc
            tl.store(values + (head - HEADS - KV_HEADS) * stride_vh + entry[:, None],
                     product.to(VALUES.dtype.element_ty), mask=valid[None, :])
        else:
            tl.store(OUT + m[None, :] * stride_or + n[:, None], product, mask=valid[None, :])
            finished = 0
            if HEAD_DIM > BLOCK_N:  # the head's other parts are other programs'
                tl.debug_barrier()  # every thread's part is stored before the counter says so
                finished = tl.atomic_add(COUNTS + head, 1, sem="acq_rel") - (HEAD_DIM // BLOCK_N - 1)
            if finished == 0:  # the head's last program: its parts are visible (acquire; `_rotated` reads past L1)
                d = tl.arange(0, HEAD_DIM)
                angle = valid[:, None]
                cos = tl.load(COS + row[:, None] * stride_cr + position[:, None] * stride_ci + d[None, :], mask=angle, other=0.0)
                sin = tl.load(SIN + row[:, None] * stride_sr + position[:, None] * stride_si + d[None, :], mask=angle, other=0.0)
                cos, sin = cos.to(tl.float32), sin.to(tl.float32)
                source = OUT + head * HEAD_DIM
                if head < HEADS:
                    query = _rotated(source, m, stride_or, valid, d, Q_WEIGHT, q_eps, cos, sin, QK_NORMED, HEAD_DIM)
                    out = QUERY + ((row[:, None] * HEADS + head) * POSITIONS + position[:, None]).to(tl.int64) * HEAD_DIM
                    tl.store(out + d[None, :], query.to(QUERY.dtype.element_ty), mask=angle)
                else:
                    key = _rotated(source, m, stride_or, valid, d, K_WEIGHT, k_eps, cos, sin, QK_NORMED, HEAD_DIM)
                    keys = KEYS + row.to(tl.int64)[:, None] * stride_kr + column[:, None] * stride_kc
                    tl.store(keys + (head - HEADS) * stride_kh + d[None, :], key.to(KEYS.dtype.element_ty), mask=angle)
                if HEAD_DIM > BLOCK_N:
                    tl.store(COUNTS + head, 0)  # ready for the next call


def qkv_rotary_block(head_dim: int) -> int:
    """The columns of one program: `BLOCK_N`, or a whole head where the head dim is smaller."""
    return min(BLOCK_N, head_dim)


def qkv_rotary_counts(heads: int, kv_heads: int, device: torch.device) -> torch.Tensor:
    """The zeroed counters of a layer's query and key heads: the kernel leaves them zeroed."""
    return torch.zeros(heads + kv_heads, dtype=torch.int32, device=device)


def qkv_rotary_runs(x: torch.Tensor, plan: SplitPlan | None) -> bool:
    """Whether the kernel runs for the decode step's layer input `x` (rows, positions, hidden) of a matrix with
    `plan`: `ENABLED`, a plan, and `split_k_runs(x)` (half precision on a GPU, at most `MAX_ROWS` tokens)."""
    return ENABLED and plan is not None and x.dim() == 3 and split_k_runs(x)


def qkv_rotary_write(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, plan: SplitPlan, counts: torch.Tensor,
    heads: int, kv_heads: int, head_dim: int, q_norm: Any, k_norm: Any, cos: torch.Tensor, sin: torch.Tensor,
    layer: Any, norm_eps: float | None = None,
) -> torch.Tensor:
    """`triton_rotary.rotary_cache_write` of the q/k/v product F.linear(x, weight, bias) (of x's rows RMS-normalised
    first with `norm_eps`, the norm's weight folded into `weight`) in one launch: the (rows, heads, positions, head
    dim) queries, the keys and values written into `layer`'s cache at its `write_index` columns. `counts` is the
    layer's `qkv_rotary_counts`, which no other call may use at the same time; `plan` gives the pipeline's depth."""
    if triton is None:
        raise RuntimeError("the q/k/v rotary kernel needs the triton package (pip install triton)")
    rows, positions, inner = x.shape
    columns = weight.shape[0]
    tokens = rows * positions
    if tokens > MAX_ROWS:
        raise ValueError(f"the q/k/v rotary kernel takes at most {MAX_ROWS} tokens; got {rows} x {positions}")
    if columns != (heads + 2 * kv_heads) * head_dim or head_dim & (head_dim - 1) or head_dim < 16:
        raise ValueError(f"the q/k/v rotary kernel: a matrix of {columns} rows is not {heads} + 2 x {kv_heads} heads "
                         f"of a head dim that is a power of two >= 16 ({head_dim})")
    if heads % kv_heads:
        raise ValueError(f"the q/k/v rotary kernel: {heads} query heads do not group evenly over {kv_heads} key/value heads")
    if (q_norm is None) != (k_norm is None):
        raise ValueError("the q/k/v rotary kernel: give both q/k norms or neither")
    if counts.numel() != heads + kv_heads:
        raise ValueError(f"the q/k/v rotary kernel: {counts.numel()} counters for {heads} + {kv_heads} heads")
    flat = x.reshape(tokens, inner)
    if flat.stride(-1) != 1 or weight.stride(-1) != 1 or cos.stride(-1) != 1 or sin.stride(-1) != 1:
        raise ValueError("the q/k/v rotary kernel: the input's, the weight's, cos's and sin's last dims must be contiguous")
    keys, values = layer.buffers
    # buffer strides as (row, column, head): (rows, kv heads, capacity, dim), or token-major (rows, capacity, kv heads, dim)
    key_strides, value_strides = ((b.stride(0), b.stride(1 if layer.token_major else 2), b.stride(2 if layer.token_major else 1))
                                  for b in (keys, values))
    write = layer.write_index
    column_strides = (0, write.stride(0)) if write.dim() == 1 else (write.stride(0), write.stride(1))
    cos, sin = cos.expand(rows, positions, head_dim), sin.expand(rows, positions, head_dim)
    product = torch.empty((tokens, columns), dtype=x.dtype, device=x.device)  # the query and key heads' parts
    query = x.new_empty((rows, heads, positions, head_dim))
    normed = q_norm is not None
    block = qkv_rotary_block(head_dim)
    _qkv_rotary_kernel[(columns // block,)](
        flat, weight, bias if bias is not None else weight, product, counts,
        q_norm.weight if normed else weight, k_norm.weight if normed else weight, cos, sin, write, query, keys, values,
        tokens, columns, inner, norm_eps if norm_eps is not None else 0.0,
        q_norm.variance_epsilon if normed else 0.0, k_norm.variance_epsilon if normed else 0.0,
        flat.stride(0), weight.stride(0), product.stride(0), cos.stride(0), cos.stride(1), sin.stride(0), sin.stride(1),
        *column_strides, *key_strides, *value_strides, positions,
        HAS_BIAS=bias is not None, NORMED=norm_eps is not None, QK_NORMED=normed, HEADS=heads, KV_HEADS=kv_heads,
        HEAD_DIM=head_dim, BLOCK_M=16 if tokens <= 16 else 32, BLOCK_N=block, BLOCK_K=BLOCK_K,
        INNER=-(-inner // BLOCK_K) * BLOCK_K, num_warps=4, num_stages=plan.stages,
    )
    return query
