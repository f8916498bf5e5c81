"""The split-K matmul of a decode step's few rows (travel/generation/kernels/skinny_matmul.py) is F.linear: its fp32 partial
products over slices of the inner dimension add up to the product, whatever the rows, the column blocks and the
slices (the last ones partial), call after call. On the CPU Triton's interpreter runs the kernel (tests/conftest.py);
on a GPU the compiled kernel runs in bfloat16. `DecodeMatmul` runs it for few half-precision rows on a GPU alone."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.generation.triton_interpreter import needs_interpreter
from travel.generation.kernels.skinny_matmul import (
    BLOCK_K, MAX_ROWS, DecodeMatmul, SplitPlan, rms_normalized, skinny_linear, split_k_counts, split_k_runs, split_plan,
)

pytest.importorskip("triton", reason="triton installs on Linux x86-64 alone (the test extra brings it there)")


def reference(x, weight, bias):
    return F.linear(x.double(), weight.double(), None if bias is None else bias.double())


@needs_interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("leading", [(1,), (5,), (16,), (20,), (32,), (2, 3)],
                         ids=["1-row", "5-rows", "16-rows", "20-rows", "32-rows", "2x3-rows"])
@pytest.mark.parametrize("columns,inner,processors", [(100, 300, 8), (64, 100, 132), (40, 2000, 64)],
                         ids=["partial-blocks", "one-slice", "eight-slices"])
def test_the_split_k_product_is_the_linear_product_call_after_call(leading, columns, inner, processors, dtype):
    generator = torch.Generator().manual_seed(columns + inner)
    weight = (torch.randn(columns, inner, generator=generator) * 0.05).to(dtype)
    bias = torch.randn(columns, generator=generator).to(dtype)
    plan = SplitPlan.of(columns, inner, processors)
    counts = split_k_counts(plan, columns, torch.device("cpu"))
    tolerance = 1e-4 if dtype == torch.float32 else 2e-2
    for call in range(2):  # the last program of each column block leaves its counter zeroed for the next call
        x = torch.randn(*leading, inner, generator=generator).to(dtype)
        got = skinny_linear(x, weight, bias if call else None, plan, counts)
        assert got.shape == (*leading, columns) and got.dtype == dtype
        torch.testing.assert_close(got.double(), reference(x, weight, bias if call else None), atol=tolerance, rtol=tolerance)
        if counts is not None:
            assert counts.tolist() == [0] * plan.column_blocks(columns)


def folded_reference(x, weight, bias, norm_eps, residual):
    """The operations a folded matmul stands for, in float64: the RMSNorm without its weight (folded into `weight`
    already), the product (+bias), the residual add."""
    x = x.double()
    if norm_eps is not None:
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm_eps)
    product = reference(x, weight, bias)
    return product if residual is None else residual.double() + product


@needs_interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("leading", [(1,), (7,), (20,)], ids=["1-row", "7-rows", "20-rows"])
@pytest.mark.parametrize("fold", ["norm", "norm+bias", "residual", "residual+slices"])
def test_a_folded_norm_and_residual_give_the_unfolded_operations(fold, leading, dtype):
    """What a folded decode layer asks of its matmuls (travel/generation/kernels/fused_projections.py): its input's 1/rms,
    and the residual add, with one slice and with several; rows whose rms is far from 1."""
    columns, inner = 96, 300
    generator = torch.Generator().manual_seed(len(fold) + leading[0])
    weight = (torch.randn(columns, inner, generator=generator) * 0.05).to(dtype)
    bias = torch.randn(columns, generator=generator).to(dtype) if "bias" in fold else None
    norm_eps = 1e-6 if "norm" in fold else None
    residual = torch.randn(*leading, columns, generator=generator).to(dtype) if "residual" in fold else None
    plan = SplitPlan.of(columns, inner, processors=16 if fold == "residual+slices" else 1, normed=norm_eps is not None)
    assert plan.splits == (2 if fold == "residual+slices" else 1)
    counts = split_k_counts(plan, columns, torch.device("cpu"))
    tolerance = 1e-4 if dtype == torch.float32 else 2e-2
    for _ in range(2):
        x = (3 * torch.randn(*leading, inner, generator=generator)).to(dtype)
        got = skinny_linear(x, weight, bias, plan, counts, norm_eps, residual)
        assert got.shape == (*leading, columns) and got.dtype == dtype
        expected = folded_reference(x, weight, bias, norm_eps, residual)
        torch.testing.assert_close(got.double(), expected, atol=tolerance, rtol=tolerance)
        # the same operations one by one: what DecodeMatmul.folded runs where the kernel does not
        unfolded = DecodeMatmul(weight).folded(x, weight, bias, norm_eps, residual)
        torch.testing.assert_close(unfolded.double(), expected, atol=tolerance, rtol=tolerance)


def test_a_folded_norm_needs_a_plan_of_one_slice():
    assert SplitPlan.of(64, 4096, processors=132, normed=True).splits == 1
    slices = SplitPlan.of(64, 4096, processors=132)
    assert slices.splits == 8
    x, weight = torch.randn(2, 4096), torch.randn(64, 4096)
    with pytest.raises(ValueError, match="decode_weights=folded: a folded norm needs a plan of one slice; got 8"):
        skinny_linear(x, weight, None, slices, split_k_counts(slices, 64, torch.device("cpu")), norm_eps=1e-6)


def test_rms_normalized_is_the_norm_without_its_weight():
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

    x = torch.randn(3, 5, 48, generator=torch.Generator().manual_seed(2)) * 4
    norm = Qwen3RMSNorm(48, eps=1e-5)
    torch.testing.assert_close(rms_normalized(x, 1e-5), norm(x), rtol=0, atol=0)
    torch.testing.assert_close(rms_normalized(x.bfloat16(), 1e-5), norm.bfloat16()(x.bfloat16()), rtol=0, atol=0)


def test_the_plan_fills_the_processors_about_once_and_its_slices_cover_the_inner_dimension():
    plans = {shape: SplitPlan.of(*shape, processors=132) for shape in [(6144, 2560), (2560, 4096), (19456, 2560), (2560, 9728)]}
    # Qwen3-4B's fused q/k/v, o, gate/up and down on an H200's 132 multiprocessors: 96, 40, 304 and 40 column blocks
    assert [(plan.block_n, plan.splits, plan.stages) for plan in plans.values()] == [(64, 1, 4), (64, 3, 4), (64, 1, 3), (64, 3, 4)]
    for (columns, inner), plan in plans.items():
        assert plan.split % BLOCK_K == 0
        assert (plan.splits - 1) * plan.split < inner <= plan.splits * plan.split  # no empty slice, none missing
    assert SplitPlan.of(64, 100, processors=132).splits == 1  # fewer entries than one loop iteration: one slice
    assert split_k_counts(SplitPlan.of(64, 100, processors=132), 64, torch.device("cpu")) is None
    assert split_k_counts(plans[(2560, 4096)], 2560, torch.device("cpu")).tolist() == [0] * 40


def test_a_decode_matmul_runs_f_linear_where_the_kernel_does_not_pay_off():
    generator = torch.Generator().manual_seed(0)
    weight, bias = torch.randn(48, 64, generator=generator), torch.randn(48, generator=generator)
    matmul = DecodeMatmul(weight)
    assert matmul.plan is None and matmul.counts is None  # no plan off the GPU
    for x in (torch.randn(3, 64, generator=generator), torch.randn(MAX_ROWS + 1, 64, generator=generator).half()):
        assert not split_k_runs(x)  # CPU tensors, and more rows than a tile
        assert torch.equal(matmul(x, weight.to(x.dtype), bias.to(x.dtype)), F.linear(x, weight.to(x.dtype), bias.to(x.dtype)))
    assert split_plan(weight, "cublas") is None
    with pytest.raises(ValueError, match="hardware.decode_matmul='cutlass': choose one of split_k, cublas"):
        DecodeMatmul(weight, "cutlass")
    plan = SplitPlan.of(48, 1024, processors=8)
    with pytest.raises(ValueError, match=f"takes at most {MAX_ROWS} rows; got {MAX_ROWS + 1}"):
        counts = split_k_counts(plan, 48, torch.device("cpu"))
        skinny_linear(torch.randn(MAX_ROWS + 1, 1024), torch.randn(48, 1024), None, plan, counts)
    with pytest.raises(ValueError, match=r"a plan of 8 slice\(s\) got counters=False"):
        skinny_linear(torch.randn(2, 1024), torch.randn(48, 1024), None, plan, None)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the compiled Triton kernel needs CUDA")
@pytest.mark.parametrize("rows", [1, 5, 16, 20, 32])
@pytest.mark.parametrize("columns,inner", [(6144, 2560), (2560, 4096), (19456, 2560), (2560, 9728)],
                         ids=["qkv", "o", "gate_up", "down"])
def test_the_compiled_kernel_on_cuda_matches_cublas(rows, columns, inner):
    generator = torch.Generator(device="cuda").manual_seed(rows)
    weight = (torch.randn(columns, inner, generator=generator, device="cuda") * 0.02).bfloat16()
    matmul = DecodeMatmul(weight)
    assert matmul.plan is not None
    for _ in range(3):  # each call leaves the counters zeroed for the next
        x = torch.randn(rows, inner, generator=generator, device="cuda").bfloat16()
        assert split_k_runs(x)
        got = matmul(x, weight)
        torch.testing.assert_close(got.double(), reference(x, weight, None), atol=2e-2, rtol=1e-2)  # bf16 rounding
        torch.testing.assert_close(got, F.linear(x, weight), atol=2e-2, rtol=1e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the compiled Triton kernel needs CUDA")
@pytest.mark.parametrize("rows", [1, 20])
@pytest.mark.parametrize("fold,columns,inner", [("norm", 6144, 2560), ("norm", 19456, 2560), ("residual", 2560, 4096),
                                                ("residual", 2560, 9728)], ids=["qkv", "gate_up", "o", "down"])
def test_the_compiled_folds_on_cuda_match_the_unfolded_operations(rows, fold, columns, inner):
    generator = torch.Generator(device="cuda").manual_seed(rows)
    weight = (torch.randn(columns, inner, generator=generator, device="cuda") * 0.02).bfloat16()
    matmul = DecodeMatmul(weight, normed=fold == "norm")
    norm_eps = 1e-6 if fold == "norm" else None
    for _ in range(3):  # each call leaves the counters zeroed for the next
        x = (3 * torch.randn(rows, inner, generator=generator, device="cuda")).bfloat16()
        residual = torch.randn(rows, columns, generator=generator, device="cuda").bfloat16() if fold == "residual" else None
        assert split_k_runs(x)
        got = matmul.folded(x, weight, None, norm_eps, residual)
        expected = folded_reference(x, weight, None, norm_eps, residual)
        torch.testing.assert_close(got.double(), expected, atol=3e-2, rtol=2e-2)
