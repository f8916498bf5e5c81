"""A decode step's weight matmuls of few rows (hardware.decode_matmul=split_k): a split-K Triton kernel that reads
the small matrices nearer the GPU's bandwidth than cuBLAS.

A decode step multiplies a few rows (one per candidate) by every weight matrix, so a matmul costs the time to read
its matrix. cuBLAS reads the small ones well below the bandwidth: a 4B model's 2,560 output columns make too few
blocks of columns to keep 132 multiprocessors reading. Here program (column block, slice) reads `BLOCK_N` columns of
the matrix over one of `splits` slices of the inner dimension, so 40 column blocks x 3 slices fill the GPU about once
(`SplitPlan`). Each program writes its fp32 partial product; the last of a column block's programs to finish (a
counter per block, which it resets for the next call) adds the block's partials in slice order and writes the
product in the input's dtype. So the result does not depend on which program finished last, and the step's other
kernels read the product as they read F.linear's. With one slice the program writes the product directly. A program
computes the transposed product, its block of the weight times the rows: the tensor cores take the weight's 64 rows
as their first operand and the few input rows (padded to 16 or 32) as their narrow second one, which read faster than
the rows as the first operand at every row count measured.

Contract: `DecodeMatmul` computes `F.linear(x, weight, bias)` for x (..., inner) and weight (columns, inner) and
returns (..., columns) in x's dtype. It runs the kernel where it pays off (CUDA, half precision, at most `MAX_ROWS`
rows) and F.linear elsewhere (prefills, jump steps of many positions, 40-row buffers, the CPU). One rounding of the
fp32 sum to the input's dtype is what cuBLAS computes up to the order of the additions.
For the folded decode layers (hardware.decode_weights=folded, travel/generation/kernels/fused_projections.py) the kernel also
takes an RMSNorm of its input whose weight is folded into the matrix (the squares of the loaded rows added up beside
the tensor cores, the product scaled by each row's 1/rms at the end) and a residual added to its product, at little
cost over the plain matmul. Timings against cuBLAS, alone (bench/matmul_floor.py --split-k) and in the decode step:
docs/performance.md.
Under `TRITON_INTERPRET=1` Triton's interpreter runs the kernel on CPU tensors (float32 and float16; its bfloat16
products are not exact), which is how the CPU tests check it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from travel.generation.options import check_decode_matmul
from travel.generation.kernels.triton_prefill import prefill_kernels_run, residual_linear, rms_rows
from travel.generation.triton_varlen import triton

# rows of one program's tile, padded to 16 or 32 for the tensor cores; more rows run F.linear, since at 40 rows (a
# 64-row tile) the kernel read a step's matrices no faster than cuBLAS
MAX_ROWS = 32
BLOCK_N = 64  # columns of one program's tile
BLOCK_K = 128  # inner-dimension entries per loop iteration
WAVES = 1  # programs per multiprocessor the slices aim at
MAX_SPLITS = 8

if triton is not None:
    import triton.language as tl

    @triton.jit
    def _split_k_kernel(X, W, BIAS, RESIDUAL, OUT, PART, COUNTS, rows, columns, inner, eps, stride_xr, stride_wn,
                        stride_rr, stride_or, stride_ps, stride_pr, HAS_BIAS: tl.constexpr, NORMED: tl.constexpr,
                        HAS_RESIDUAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        SPLIT: tl.constexpr, SPLITS: tl.constexpr):
        """Program (column block, slice): X (rows, inner) times W's columns (W is (columns, inner)) over inner entries
        slice x SPLIT up to SPLIT more; OUT (rows, columns) gets the sum over the SPLITS slices, plus BIAS. The tile is
        the transposed product, W's block times X's rows (BLOCK_N, BLOCK_M): the weight is the tensor cores' first
        operand, whose 64 rows they take whole, and the few rows of X their narrow second one.
        NORMED (one slice): X's rows are RMS-normalised first, the norm's weight being folded into W already: the
        program adds up the squares of the rows it loads (beside the tensor cores, which read the loads unchanged) and
        scales its product by each row's 1 / sqrt(mean(x^2) + eps) at the end. HAS_RESIDUAL: OUT gets RESIDUAL (rows,
        columns) plus the product, rounded as the two separate operations would be."""
        block, piece = tl.program_id(0), tl.program_id(1)
        n = block * BLOCK_N + tl.arange(0, BLOCK_N)
        m = tl.arange(0, BLOCK_M)
        k = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_N, BLOCK_M), tl.float32)
        squares = tl.zeros((BLOCK_K, BLOCK_M), tl.float32)  # summed over the inner entries once, after the loop
        for start in range(piece * SPLIT, piece * SPLIT + SPLIT, BLOCK_K):
            kk = start + k
            w = tl.load(W + n[:, None].to(tl.int64) * stride_wn + kk[None, :],
                        mask=(n[:, None] < columns) & (kk[None, :] < inner), other=0.0)
            x = tl.load(X + m[None, :] * stride_xr + kk[:, None], mask=(m[None, :] < rows) & (kk[:, None] < inner), other=0.0)
            acc += tl.dot(w, x)
            if NORMED:
                wide = x.to(tl.float32)
                squares += wide * wide
        if NORMED:
            acc = acc * tl.rsqrt(tl.sum(squares, axis=0) / inner + eps)[None, :]
        valid = (n[:, None] < columns) & (m[None, :] < rows)
        out = OUT + m[None, :] * stride_or + n[:, None]
        dtype = OUT.dtype.element_ty
        bias = tl.load(BIAS + n, mask=n < columns, other=0.0).to(tl.float32) if HAS_BIAS else tl.zeros((BLOCK_N,), tl.float32)
        if SPLITS == 1:
            total = acc + bias[:, None]
            if HAS_RESIDUAL:
                residual = tl.load(RESIDUAL + m[None, :] * stride_rr + n[:, None], mask=valid, other=0.0)
                total = residual.to(tl.float32) + total.to(dtype).to(tl.float32)
            tl.store(out, total.to(dtype), mask=valid)
        else:
            parts = PART + m[None, :] * stride_pr + n[:, None]
            tl.store(parts + piece * stride_ps, acc, mask=valid)
            tl.debug_barrier()  # every thread's partial is stored before the counter says so
            finished = tl.atomic_add(COUNTS + block, 1, sem="acq_rel")  # the block's programs done before this one
            if finished == SPLITS - 1:  # the last one: the others' partials are visible (acquire, read past L1)
                total = tl.zeros((BLOCK_N, BLOCK_M), tl.float32) + bias[:, None]
                for part in tl.static_range(SPLITS):  # in slice order, whichever program finished last
                    total += tl.load(parts + part * stride_ps, mask=valid, other=0.0, cache_modifier=".cg")
                if HAS_RESIDUAL:
                    residual = tl.load(RESIDUAL + m[None, :] * stride_rr + n[:, None], mask=valid, other=0.0)
                    total = residual.to(tl.float32) + total.to(dtype).to(tl.float32)
                tl.store(out, total.to(dtype), mask=valid)
                tl.store(COUNTS + block, 0)  # ready for the next call


@dataclass(frozen=True)
class SplitPlan:
    """How the kernel cuts a (columns, inner) matrix: column blocks of `block_n` (BLOCK_N for every matrix), `splits`
    slices of the inner dimension of `split` entries each (whole loop iterations; the last slice may be shorter),
    `stages` software-pipelined loads. A plan for a matmul that folds its input's norm (`normed`) has one slice: its
    programs then see their rows whole."""

    splits: int
    split: int
    stages: int

    @classmethod
    def of(cls, columns: int, inner: int, processors: int, normed: bool = False) -> "SplitPlan":
        """Column blocks of 64, and as many slices as take the programs to about WAVES per multiprocessor (one if
        `normed`; Qwen3-4B's q/k/v and gate/up take one on an H200 either way); loads four deep, three where the
        blocks alone fill the multiprocessors twice (H200, Qwen3-4B's shapes, 1 to 32 rows: the fastest of 48 tiles
        measured, or within 4% of it)."""
        blocks = cls.column_blocks(columns)
        splits = 1 if normed else max(1, min(MAX_SPLITS, inner // BLOCK_K, round(WAVES * processors / blocks)))
        per_split = -(-inner // splits)
        split = -(-per_split // BLOCK_K) * BLOCK_K
        return cls(-(-inner // split), split, 3 if blocks >= 2 * processors else 4)

    @property
    def block_n(self) -> int:
        return BLOCK_N

    @staticmethod
    def column_blocks(columns: int) -> int:
        return -(-columns // BLOCK_N)


def split_k_counts(plan: SplitPlan, columns: int, device: torch.device) -> torch.Tensor | None:
    """The zeroed counters of one matrix's column blocks (None with one slice): the kernel leaves them zeroed."""
    return torch.zeros(plan.column_blocks(columns), dtype=torch.int32, device=device) if plan.splits > 1 else None


def skinny_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, plan: SplitPlan, counts: torch.Tensor | None,
    norm_eps: float | None = None, residual: torch.Tensor | None = None,
) -> torch.Tensor:
    """F.linear(x, weight, bias) for at most MAX_ROWS rows of x (any leading dims) by the split-K kernel; `counts`
    is the matrix's `split_k_counts`, which no other call may use at the same time.
    With `norm_eps` the rows are first RMS-normalised (x / sqrt(mean(x^2) + norm_eps), `rms_normalized`), the norm's
    weight being folded into `weight` by the caller; `residual` (x's rows by the output's columns) is added to the
    product."""
    if triton is None:
        raise RuntimeError("hardware.decode_matmul=split_k needs the triton package (pip install triton)")
    inner, columns = x.shape[-1], weight.shape[0]
    flat = x.reshape(-1, inner)
    rows = flat.shape[0]
    if rows > MAX_ROWS:
        raise ValueError(f"hardware.decode_matmul=split_k: the kernel takes at most {MAX_ROWS} rows; got {rows}")
    if flat.stride(-1) != 1 or weight.stride(-1) != 1:
        raise ValueError("hardware.decode_matmul=split_k: the input's and the weight's last dims must be contiguous")
    if (plan.splits > 1) != (counts is not None):
        raise ValueError(f"hardware.decode_matmul=split_k: a plan of {plan.splits} slice(s) got counters={counts is not None}; "
                         "a plan of several slices needs its split_k_counts, one of one slice none")
    if norm_eps is not None and plan.splits > 1:
        raise ValueError(f"hardware.decode_weights=folded: a folded norm needs a plan of one slice; got {plan.splits}")
    flat_residual = residual.reshape(rows, columns) if residual is not None else None
    if flat_residual is not None and flat_residual.stride(-1) != 1:
        raise ValueError("hardware.decode_matmul=split_k: the residual's last dim must be contiguous")
    output = torch.empty((rows, columns), dtype=x.dtype, device=x.device)
    # one slice writes the product directly: no partials, and the unused pointers are never read
    parts = torch.empty((plan.splits, rows, columns), dtype=torch.float32, device=x.device) if plan.splits > 1 else output
    _split_k_kernel[(plan.column_blocks(columns), plan.splits)](
        flat, weight, bias if bias is not None else weight, flat_residual if flat_residual is not None else output,
        output, parts, counts if counts is not None else output, rows, columns, inner,
        norm_eps if norm_eps is not None else 0.0, flat.stride(0), weight.stride(0),
        flat_residual.stride(0) if flat_residual is not None else 0, output.stride(0), parts.stride(0), parts.stride(-2),
        HAS_BIAS=bias is not None, NORMED=norm_eps is not None, HAS_RESIDUAL=residual is not None,
        BLOCK_M=16 if rows <= 16 else 32, BLOCK_N=plan.block_n, BLOCK_K=BLOCK_K, SPLIT=plan.split, SPLITS=plan.splits,
        num_warps=4, num_stages=plan.stages,
    )
    return output.view(*x.shape[:-1], columns)


def split_k_runs(x: torch.Tensor) -> bool:
    """Whether a `DecodeMatmul` with a plan runs the kernel for `x`: half precision on a GPU, at most MAX_ROWS rows.
    Tensor attributes and sizes alone, which torch.compile reads as constants of the step."""
    half = x.dtype in (torch.float16, torch.bfloat16)
    return triton is not None and x.is_cuda and half and x.numel() // x.shape[-1] <= MAX_ROWS


def split_plan(weight: torch.Tensor, matmul: str, normed: bool = False) -> SplitPlan | None:
    """The plan of `weight` (columns, inner) for the kernel (`SplitPlan.of`'s `normed`), or None where its matmuls
    run F.linear alone: `matmul="cublas"`, a weight off the GPU, no triton."""
    if check_decode_matmul(matmul) == "cublas" or triton is None or not weight.is_cuda:
        return None
    processors = torch.cuda.get_device_properties(weight.device).multi_processor_count
    return SplitPlan.of(weight.shape[0], weight.shape[1], processors, normed)


def rms_normalized(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) over the last dim, computed in float32 and returned in x's dtype: a Llama-family
    RMSNorm without its weight (a folded layer's weight lives in the next matrix)."""
    wide = x.float()
    return (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


class DecodeMatmul(torch.nn.Module):
    """F.linear(x, weight, bias) of one matrix of the decode weights' layers (the weight is the caller's, passed at
    every call): by the kernel where the matrix has a plan (found when the layers are built, not in a step) and
    `split_k_runs(x)`, else F.linear. Holds the matrix's counters as a buffer, so each matrix has its own.

    `normed` gives the matrix a plan that can fold its input's norm (one slice); `folded` computes the product with
    the folds of `skinny_linear` by the kernel where it runs, by separate operations elsewhere."""

    def __init__(self, weight: torch.Tensor, matmul: str = "split_k", normed: bool = False):
        super().__init__()
        self.plan = split_plan(weight, matmul, normed)
        self.prefill_kernels = check_decode_matmul(matmul) == "split_k"  # cublas: the model's operations throughout
        counts = split_k_counts(self.plan, weight.shape[0], weight.device) if self.plan is not None else None
        self.register_buffer("counts", counts, persistent=False)

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        return self.folded(x, weight, bias)

    def folded(
        self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, norm_eps: float | None = None,
        residual: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """F.linear(rms_normalized(x, norm_eps), weight, bias) + residual (each fold where given)."""
        if self.plan is not None and split_k_runs(x):
            return skinny_linear(x, weight, bias, self.plan, self.counts, norm_eps, residual)
        # a prefill's norm by one kernel, its residual add in cuBLAS's epilogue (travel/generation/kernels/triton_prefill.py)
        eager = self.prefill_kernels and prefill_kernels_run(x)
        if norm_eps is not None:
            x = rms_rows(x, norm_eps) if eager else rms_normalized(x, norm_eps)
        if eager and residual is not None and bias is None:
            return residual_linear(x, weight, residual)
        product = F.linear(x, weight, bias)
        return product if residual is None else residual + product
