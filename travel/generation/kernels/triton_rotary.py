"""A decode step's attention inputs in one Triton kernel: each head's q/k RMSNorm, the rotary embedding and the
writes of the step's keys and values into the cache.

Between a fused layer's q/k/v matmul and its attention, the compiled decode step ran three small kernels: Qwen3's
per-head q and k norms with the rotary embedding, then one cache write for the keys and one for the values
(`StaticPositionLayer.update`'s `index_copy_`). Each reads and writes a few kilobytes; what it costs is its launch and
its ramp-up and tail, a few microseconds, 36 times a step for a 4B model. `rotary_cache_write` does all three in one
launch: program (token, key/value head) reads that head's group of query heads, its key and its value from the
token's q/k/v product, normalises the queries and the key (where the model has q/k norms), rotates them, and writes
the queries to the query tensor and the key and value to the cache column the step writes for that token. It returns
the (rows, heads, positions, head dim) queries; the keys and values go to the cache in place. A program per token and
key/value head, not per token, is what makes it faster than the three kernels it replaces (docs/performance.md).

The arithmetic is the model's: the norm in float32 and rounded to the product's dtype before its weight (as
transformers' RMSNorm does), the rotation `x * cos + rotate_half(x) * sin` in float32 with one rounding, as the
compiled step's fused kernel computes it. The kernel runs where `rotary_cache_runs` says (half precision on a GPU, in
the fused or folded decode copy's layers with `hardware.decode_matmul=split_k`); under `TRITON_INTERPRET=1`
Triton's interpreter runs it on CPU tensors, which is how the CPU tests check it against the model's operations.
"""

from __future__ import annotations

from typing import Any

import torch

from travel.generation.triton_varlen import triton


if triton is not None:
    import triton.language as tl

    @triton.jit
    def _rotated(source, h, valid, d, WEIGHT, eps, cos, sin, NORMED: tl.constexpr, HEAD_DIM: tl.constexpr):
        """Heads `h` (a block, `valid` where they exist) of one token's product at `source`: normalised by the norm of
        weight WEIGHT where NORMED, then rotated by `cos`/`sin`, in float32."""
        partner = d ^ (HEAD_DIM // 2)  # rotate_half: the other half's entry, negated in the first half
        sign = tl.where(d < HEAD_DIM // 2, -1.0, 1.0)
        mask = valid[:, None]
        x = tl.load(source + h[:, None] * HEAD_DIM + d[None, :], mask=mask, other=0.0).to(tl.float32)
        x_partner = tl.load(source + h[:, None] * HEAD_DIM + partner[None, :], mask=mask, other=0.0).to(tl.float32)
        if NORMED:
            dtype = source.dtype.element_ty
            rstd = 1.0 / tl.sqrt(tl.sum(x * x, 1) / HEAD_DIM + eps)
            weight, partner_weight = tl.load(WEIGHT + d).to(dtype), tl.load(WEIGHT + partner).to(dtype)
            x = ((x * rstd[:, None]).to(dtype) * weight[None, :]).to(tl.float32)
            x_partner = ((x_partner * rstd[:, None]).to(dtype) * partner_weight[None, :]).to(tl.float32)
        return x * cos[None, :] + sign[None, :] * x_partner * sin[None, :]

    @triton.jit
    def _rotary_cache_kernel(
        QKV, Q_WEIGHT, K_WEIGHT, COS, SIN, COLUMNS, QUERY, KEYS, VALUES,
        q_eps, k_eps, stride_xt, stride_cr, stride_ci, stride_sr, stride_si, stride_wr, stride_wi,
        stride_kr, stride_kc, stride_kh, stride_vr, stride_vc, stride_vh,
        POSITIONS, HEADS: tl.constexpr, KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
        BLOCK_G: tl.constexpr, NORMED: tl.constexpr,
    ):
        """Program (token, kv head): position token % POSITIONS of row token // POSITIONS, and the key/value head's
        group of query heads. Its query heads go to QUERY (rows, HEADS, POSITIONS, HEAD_DIM); its key, rotated, and
        its value to the cache column COLUMNS[row, position]."""
        token, kv_head = tl.program_id(0), tl.program_id(1)
        row, position = token // POSITIONS, token % POSITIONS
        d = tl.arange(0, HEAD_DIM)
        source = QKV + token.to(tl.int64) * stride_xt
        cos = tl.load(COS + row * stride_cr + position * stride_ci + d).to(tl.float32)
        sin = tl.load(SIN + row * stride_sr + position * stride_si + d).to(tl.float32)
        group = HEADS // KV_HEADS
        g = tl.arange(0, BLOCK_G)
        h = kv_head * group + g
        query = _rotated(source, h, g < group, d, Q_WEIGHT, q_eps, cos, sin, NORMED, HEAD_DIM)
        out = QUERY + ((row * HEADS + h[:, None]) * POSITIONS + position).to(tl.int64) * HEAD_DIM + d[None, :]
        tl.store(out, query.to(QUERY.dtype.element_ty), mask=(g < group)[:, None])
        j = kv_head + tl.arange(0, 1)
        key = _rotated(source + HEADS * HEAD_DIM, j, j < KV_HEADS, d, K_WEIGHT, k_eps, cos, sin, NORMED, HEAD_DIM)
        column = tl.load(COLUMNS + row * stride_wr + position * stride_wi)
        tl.store(KEYS + row.to(tl.int64) * stride_kr + column * stride_kc + j[:, None] * stride_kh + d[None, :],
                 key.to(KEYS.dtype.element_ty))
        value = tl.load(source + (HEADS + KV_HEADS) * HEAD_DIM + j[:, None] * HEAD_DIM + d[None, :])
        tl.store(VALUES + row.to(tl.int64) * stride_vr + column * stride_vc + j[:, None] * stride_vh + d[None, :],
                 value.to(VALUES.dtype.element_ty))


def rotary_cache_runs(qkv: torch.Tensor) -> bool:
    """Whether the kernel runs for the q/k/v product `qkv`: half precision on a GPU. Tensor attributes alone, which
    torch.compile reads as constants of the step."""
    return triton is not None and qkv.is_cuda and qkv.dtype in (torch.float16, torch.bfloat16)


def rotary_cache_write(
    qkv: torch.Tensor,
    heads: int,
    kv_heads: int,
    head_dim: int,
    q_norm: Any,
    k_norm: Any,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layer: Any,
) -> torch.Tensor:
    """The (rows, heads, positions, head dim) queries of the q/k/v product `qkv` (rows, positions, (heads + 2 x
    kv heads) x head dim), normalised by `q_norm` and rotated by `cos`/`sin` (rows, positions, head dim); the keys
    (normalised by `k_norm`, rotated) and values written into `layer`'s cache buffers (a `StaticPositionLayer`) at its
    `write_index` columns: (positions,) for every row, or (rows, positions). `q_norm` and `k_norm` are the model's
    RMSNorm modules, or both None for a model without them."""
    keys, values = layer.buffers
    # buffer strides as (row, column, head): (rows, kv heads, capacity, dim), or token-major (rows, capacity, kv heads, dim)
    strides = [(b.stride(0), b.stride(1 if layer.token_major else 2), b.stride(2 if layer.token_major else 1))
               for b in (keys, values)]
    return _rotate(qkv, heads, kv_heads, head_dim, q_norm, k_norm, cos, sin, keys, values, strides, layer.write_index,
                   "rotary_cache_write")


def rotary_split(
    qkv: torch.Tensor, heads: int, kv_heads: int, head_dim: int, q_norm: Any, k_norm: Any, cos: torch.Tensor,
    sin: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`rotary_cache_write`'s queries, keys and values as fresh (rows, heads or kv heads, positions, head dim)
    tensors instead of cache writes: a prefill's, whose cache is filled after (travel/generation/kernels/triton_prefill.py)."""
    rows, positions = qkv.shape[:2]
    keys, values = (qkv.new_empty((rows, kv_heads, positions, head_dim)) for _ in range(2))
    strides = [(b.stride(0), b.stride(2), b.stride(1)) for b in (keys, values)]
    columns = torch.arange(positions, device=qkv.device)
    query = _rotate(qkv, heads, kv_heads, head_dim, q_norm, k_norm, cos, sin, keys, values, strides, columns,
                    "rotary_split")
    return query, keys, values


def _rotate(
    qkv: torch.Tensor, heads: int, kv_heads: int, head_dim: int, q_norm: Any, k_norm: Any, cos: torch.Tensor,
    sin: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, strides: list[tuple[int, int, int]],
    columns: torch.Tensor, caller: str,
) -> torch.Tensor:
    """The kernel's launch: the queries returned, keys and values stored at `columns` of `keys`/`values`, whose
    `strides` are (row, column, head)."""
    if triton is None:
        raise RuntimeError(f"{caller}: the rotary kernel needs the triton package (pip install triton)")
    rows, positions, width = qkv.shape
    if width != (heads + 2 * kv_heads) * head_dim or head_dim & (head_dim - 1) or head_dim < 2:
        raise ValueError(f"{caller}: a q/k/v product of width {width} is not {heads} + 2 x {kv_heads} heads "
                         f"of a head dim that is a power of two ({head_dim})")
    if heads % kv_heads:
        raise ValueError(f"{caller}: {heads} query heads do not group evenly over {kv_heads} key/value heads")
    if (q_norm is None) != (k_norm is None):
        raise ValueError(f"{caller}: give both q/k norms or neither")
    flat = qkv.reshape(rows * positions, width)
    if flat.stride(-1) != 1 or cos.stride(-1) != 1 or sin.stride(-1) != 1:
        raise ValueError(f"{caller}: the q/k/v product's, cos's and sin's last dims must be contiguous")
    column_strides = (0, columns.stride(0)) if columns.dim() == 1 else (columns.stride(0), columns.stride(1))
    cos, sin = cos.expand(rows, positions, head_dim), sin.expand(rows, positions, head_dim)
    query = qkv.new_empty((rows, heads, positions, head_dim))
    normed = q_norm is not None
    _rotary_cache_kernel[(rows * positions, kv_heads)](
        flat, q_norm.weight if normed else flat, k_norm.weight if normed else flat, cos, sin, columns, query, keys, values,
        q_norm.variance_epsilon if normed else 0.0, k_norm.variance_epsilon if normed else 0.0,
        flat.stride(0), cos.stride(0), cos.stride(1), sin.stride(0), sin.stride(1), *column_strides,
        *strides[0], *strides[1], positions,
        HEADS=heads, KV_HEADS=kv_heads, HEAD_DIM=head_dim,
        BLOCK_G=triton.next_power_of_2(heads // kv_heads), NORMED=normed,
        num_warps=4,
    )
    return query
