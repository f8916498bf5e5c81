"""The decode step's matmuls of a few rows by a weight matrix, as a Triton kernel that streams the matrix once.

A decode step multiplies a handful of rows (one per candidate) by every weight matrix, so a matmul costs the time
to read its matrix. cuBLAS read the q/k/v and o projections of Qwen3-4B at one candidate far below the H200's
bandwidth (q, k and v 15.0, 8.1 and 7.8 us for 21, 5 and 5 MB). `decode_linear` computes `F.linear(x, weight,
bias)` for up to `MAX_ROWS` rows with `_skinny_kernel`: program (column block, split) multiplies all the rows by
`BLOCK_N` rows of the weight over its share of the inner dimension, accumulating in float32 with tensor-core dots
(the rows padded to 16 or 32, which costs no reads), and writes that partial product; the splits (split-K, for
matrices too narrow to give every multiprocessor a column block) are summed in float32 by torch, which
TorchInductor fuses into whatever reads the output. The tile sizes per shape come from `skinny_config`, measured
with `bench/decode_linear.py`.

Off a GPU (or for more rows, or full precision inputs) it is `F.linear`. Under `TRITON_INTERPRET=1` Triton's
interpreter runs the kernel on CPU tensors, which is how the CPU tests check it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from travel.generation.triton_varlen import triton, triton_runs

MAX_ROWS = 32  # more rows than this are a matmul cuBLAS reads at its bandwidth: F.linear


@dataclass(frozen=True)
class SkinnyConfig:
    """Tiles of `_skinny_kernel`: `block_n` weight rows per program, `block_k` inner elements per step, `splits`
    programs along the inner dimension, and the launch's warps and pipeline stages."""

    block_n: int = 64
    block_k: int = 256
    splits: int = 1
    warps: int = 4
    stages: int = 4


def skinny_config(rows: int, out_features: int, in_features: int, processors: int = 132) -> SkinnyConfig:
    """The tiles for a (rows, in) x (out, in)^T product: column blocks of 32 weight rows where that gives the
    multiprocessors about two programs each, else 64, and enough inner splits that the programs fill them twice."""
    block_n = 32 if out_features // 64 < 2 * processors else 64
    blocks = -(-out_features // block_n)
    splits = 1
    while blocks * splits < 2 * processors and in_features // (splits * 2) >= 512:
        splits *= 2
    return SkinnyConfig(block_n=block_n, block_k=256 if in_features % 256 == 0 else 128, splits=splits)


if triton is not None:
    import triton.language as tl

    def _skinny_kernel(
        X, W, OUT, rows, out_features, in_features, per_split,
        stride_xm, stride_wn, stride_os, stride_om,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
    ):
        column_block, split = tl.program_id(0), tl.program_id(1)
        m = tl.arange(0, BLOCK_M)
        n = column_block * BLOCK_N + tl.arange(0, BLOCK_N)
        m_ok, n_ok = m < rows, n < out_features
        start = split * per_split
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for k0 in range(start, start + per_split, BLOCK_K):
            k = k0 + tl.arange(0, BLOCK_K)
            if EVEN_K:
                x = tl.load(X + m[:, None] * stride_xm + k[None, :], mask=m_ok[:, None], other=0.0)
                w = tl.load(W + n[:, None].to(tl.int64) * stride_wn + k[None, :], mask=n_ok[:, None], other=0.0)
            else:
                k_ok = k < in_features
                x = tl.load(X + m[:, None] * stride_xm + k[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
                w = tl.load(W + n[:, None].to(tl.int64) * stride_wn + k[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0.0)
            acc += tl.dot(x, tl.trans(w))
        tl.store(OUT + split * stride_os + m[:, None] * stride_om + n[None, :], acc.to(OUT.dtype.element_ty),
                 mask=m_ok[:, None] & n_ok[None, :])

    _SKINNY = triton.jit(_skinny_kernel)


def skinny_runs(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether `decode_linear` runs the kernel: at most `MAX_ROWS` rows, in half precision on a GPU (or in Triton's
    interpreter), the inner dimension contiguous in both."""
    rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
    return (
        triton is not None
        and 0 < rows <= MAX_ROWS
        and x.dtype in (torch.float16, torch.bfloat16)
        and triton_runs(x)
        and x.dtype == weight.dtype
        and weight.dim() == 2
        and weight.stride(1) == 1
    )


def skinny_matmul(x: torch.Tensor, weight: torch.Tensor, config: SkinnyConfig) -> torch.Tensor:
    """(rows, in) x (out, in)^T -> (rows, out) by `_skinny_kernel` under `config`, in `x`'s dtype."""
    rows, in_features = x.shape
    out_features = weight.shape[0]
    x = x if x.stride(1) == 1 else x.contiguous()
    per_split = -(-in_features // (config.splits * config.block_k)) * config.block_k
    splits = -(-in_features // per_split)
    even = in_features % config.block_k == 0 and per_split * splits == in_features
    dtype = x.dtype if splits == 1 else torch.float32
    out = torch.empty((splits, rows, out_features), dtype=dtype, device=x.device)
    _SKINNY[(-(-out_features // config.block_n), splits)](
        x, weight, out, rows, out_features, in_features, per_split,
        x.stride(0), weight.stride(0), out.stride(0), out.stride(1),
        BLOCK_M=16 if rows <= 16 else 32, BLOCK_N=config.block_n, BLOCK_K=config.block_k, EVEN_K=even,
        num_warps=config.warps, num_stages=config.stages,
    )
    return out[0] if splits == 1 else out.sum(0).to(x.dtype)


def decode_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, config: SkinnyConfig | None = None
) -> torch.Tensor:
    """`F.linear(x, weight, bias)`, by the skinny kernel where it runs (`skinny_runs`)."""
    if not skinny_runs(x, weight):
        return F.linear(x, weight, bias)
    flat = x.reshape(-1, x.shape[-1])
    config = config or skinny_config(flat.shape[0], weight.shape[0], weight.shape[1])
    out = skinny_matmul(flat, weight, config)
    if bias is not None:
        out = out + bias
    return out.reshape(*x.shape[:-1], weight.shape[0])
