"""A prompt's prefill through the folded decode copy with its elementwise work in few kernels: the norms' 1/rms and the
gated activation as Triton kernels, the residual adds in the matmuls' epilogue.

A decode step of the folded copy computes its norms and residual adds inside the split-K matmuls
(travel/generation/kernels/skinny_matmul.py), and torch.compile fuses the rest. A prefill has thousands of rows, so its
matmuls are cuBLAS's and, uncompiled, every elementwise operation between them is a kernel of its own that reads and
writes the whole (prompt tokens x width) tensor: a norm in float32 takes five passes, the rotary embedding with
Qwen3's q/k norms about a dozen, SiLU(gate) * up two: together a large share of a long prompt's eager prefill.
Compiling the prefill (`hardware.compile_prefill`) fuses them, but takes minutes per process.

Here each is one pass, in kernels whose shapes are runtime arguments (no compile per prompt length):
- `rms_rows`: x / sqrt(mean(x^2) + eps) of each row, in float32, rounded once (`rms_normalized`'s arithmetic);
- `silu_gated`: SiLU(gate) * up from the gate/up product, SiLU rounded to the product's dtype before the multiply,
  as transformers' MLP computes it;
- the q/k norms, rotary embedding and the split into queries, keys and values: `triton_rotary.rotary_split`, the
  decode step's rotary kernel writing fresh tensors;
- the residual add of the o and down projections: `torch.addmm(residual, x, weight.T)`, cuBLAS's epilogue, which
  rounds the sum once where the separate add rounded the product first.

They run where `prefill_kernels_run` says: half precision on a GPU, outside torch.compile (whose fused kernels do the
same there), in layers built with `hardware.decode_matmul=split_k` (`cublas` keeps the model's operations throughout,
as in its decode steps). The folded copy's layers run all four; the fused copy's the activation and rotary kernels,
its norms and residual adds being the model's own layer's. Each returns a fresh tensor in its input's dtype and
shape (`silu_gated`: half the last dim); the prefill they make is as fast as the compiled one without its compiles
(docs/performance.md). Under `TRITON_INTERPRET=1` Triton's interpreter runs the kernels on CPU
tensors, which is how the CPU tests check them.
"""

from __future__ import annotations

import torch

from travel.generation.triton_varlen import triton

GATED_BLOCK = 1024  # activation columns per program of `silu_gated`

if triton is not None:
    import triton.language as tl

    @triton.jit
    def _rms_rows_kernel(X, OUT, stride_x, stride_o, width, eps, BLOCK: tl.constexpr):
        """Program r: row r of X (width columns) over the root mean square of its entries, in float32."""
        row = tl.program_id(0).to(tl.int64)
        columns = tl.arange(0, BLOCK)
        inside = columns < width
        x = tl.load(X + row * stride_x + columns, mask=inside, other=0.0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(x * x, 0) / width + eps)
        tl.store(OUT + row * stride_o + columns, (x * scale).to(OUT.dtype.element_ty), mask=inside)

    @triton.jit
    def _silu_gated_kernel(GATE_UP, OUT, stride_g, stride_o, width, BLOCK: tl.constexpr):
        """Program (r, b): columns b x BLOCK onwards of SiLU(gate) * up, the gate in GATE_UP's first `width` columns of
        row r and up in the next `width`."""
        row, block = tl.program_id(0).to(tl.int64), tl.program_id(1)
        columns = block * BLOCK + tl.arange(0, BLOCK)
        inside = columns < width
        source = GATE_UP + row * stride_g
        gate = tl.load(source + columns, mask=inside, other=0.0).to(tl.float32)
        up = tl.load(source + width + columns, mask=inside, other=0.0)
        activated = (gate / (1.0 + tl.exp(-gate))).to(up.dtype)  # SiLU, rounded as the model's activation is
        gated = activated.to(tl.float32) * up.to(tl.float32)
        tl.store(OUT + row * stride_o + columns, gated.to(OUT.dtype.element_ty), mask=inside)


def prefill_kernels_run(x: torch.Tensor) -> bool:
    """Whether the fused and folded copies' uncompiled forwards compute `x`'s norms, activation, rotary embedding and
    residual adds by this module's kernels: half precision on a GPU, outside torch.compile."""
    half = x.dtype in (torch.float16, torch.bfloat16)
    return triton is not None and x.is_cuda and half and not torch.compiler.is_compiling()


def _rows(x: torch.Tensor, name: str) -> torch.Tensor:
    """`x` as (rows, last dim), its last dim contiguous (else a ValueError naming `name`)."""
    if x.stride(-1) != 1:
        raise ValueError(f"{name}: the input's last dim must be contiguous (stride {x.stride(-1)})")
    return x.reshape(-1, x.shape[-1])


def rms_rows(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) over the last dim, in float32, returned in x's dtype (`rms_normalized`)."""
    if triton is None:
        raise RuntimeError("rms_rows needs the triton package (pip install triton)")
    flat = _rows(x, "rms_rows")
    out = torch.empty_like(flat)
    if flat.shape[0]:
        _rms_rows_kernel[(flat.shape[0],)](flat, out, flat.stride(0), out.stride(0), flat.shape[1], eps,
                                           BLOCK=triton.next_power_of_2(flat.shape[1]), num_warps=8)
    return out.view(x.shape)


def silu_gated(gate_up: torch.Tensor) -> torch.Tensor:
    """SiLU(gate) * up of a gate/up product (..., 2 x width): gate the first half of the last dim, up the second."""
    if triton is None:
        raise RuntimeError("silu_gated needs the triton package (pip install triton)")
    if gate_up.shape[-1] % 2:
        raise ValueError(f"silu_gated: a gate/up product of odd width {gate_up.shape[-1]} does not split in two halves")
    flat = _rows(gate_up, "silu_gated")
    width = flat.shape[1] // 2
    out = flat.new_empty((flat.shape[0], width))
    if flat.shape[0]:
        grid = (flat.shape[0], triton.cdiv(width, GATED_BLOCK))
        _silu_gated_kernel[grid](flat, out, flat.stride(0), out.stride(0), width, BLOCK=GATED_BLOCK, num_warps=4)
    return out.view(*gate_up.shape[:-1], width)


def residual_linear(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """residual + F.linear(x, weight), the add in the matmul's epilogue (one rounding of the sum)."""
    product = torch.addmm(residual.reshape(-1, residual.shape[-1]), x.reshape(-1, x.shape[-1]), weight.t())
    return product.view(residual.shape)
