"""The q/k/v matmul with the rotary epilogue (travel/generation/rotary_matmul.py) computes what the split-K matmul
followed by the rotary kernel computes, and what the model's operations compute: the queries, and the keys and
values written into the step's cache columns alone, for heads of one program and of two (whose last program reads
the other's part), with and without a folded input norm, q/k norms and biases. On the CPU Triton's interpreter runs
the kernels (tests/conftest.py); on a GPU the compiled kernel runs in bfloat16."""

from __future__ import annotations

import pytest
import torch
from transformers.models.qwen3 import modeling_qwen3

from tests.generation.test_triton_rotary import cache_layer
from tests.generation.triton_interpreter import needs_interpreter
from travel.generation.skinny_matmul import SplitPlan, rms_normalized, skinny_linear
from travel.generation.triton_rotary import rotary_cache_write

pytest.importorskip("triton", reason="triton installs on Linux x86-64 alone (the test extra brings it there)")
from travel.generation.rotary_matmul import qkv_rotary_block, qkv_rotary_counts, qkv_rotary_write  # noqa: E402

HEADS, KV_HEADS, ROWS, INNER = 4, 2, 3, 96


def layer_inputs(positions, head_dim, qk_norms, bias, dtype, device="cpu", seed=0):
    """A layer input (rows, positions, INNER), a q/k/v matrix and bias (or None), the q/k norms (or None) and
    seeded cos/sin."""
    generator = torch.Generator().manual_seed(seed)
    columns = (HEADS + 2 * KV_HEADS) * head_dim

    def draw(*shape, scale=1.0):
        return (scale * torch.randn(shape, generator=generator)).to(device, dtype)

    x, weight = draw(ROWS, positions, INNER), draw(columns, INNER, scale=INNER**-0.5)
    norms = None, None
    if qk_norms:
        norms = tuple(modeling_qwen3.Qwen3RMSNorm(head_dim, eps=1e-6).to(device, dtype) for _ in range(2))
        for norm in norms:
            with torch.no_grad():
                norm.weight.copy_(1 + 0.3 * torch.randn(head_dim, generator=generator))
    angles = torch.randint(0, 500, (ROWS, positions), generator=generator)[..., None].float() * (
        10000.0 ** (-torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.cat((angles, angles), -1)
    return x, weight, draw(columns, scale=0.1) if bias else None, norms, angles.cos().to(device, dtype), angles.sin().to(device, dtype)


@needs_interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("head_dim", [16, 128], ids=["one-program-heads", "two-program-heads"])
@pytest.mark.parametrize("positions,token_major", [(1, False), (3, True)], ids=["one-token", "jump"])
@pytest.mark.parametrize("folded,qk_norms,bias", [(True, True, False), (False, False, True)],
                         ids=["folded-qwen3", "plain-bias"])
def test_the_kernel_writes_what_the_matmul_and_the_rotary_kernel_write(folded, qk_norms, bias, positions, token_major,
                                                                       head_dim, dtype):
    x, weight, bias_, norms, cos, sin = layer_inputs(positions, head_dim, qk_norms, bias, dtype)
    eps = 1e-5 if folded else None
    plan = SplitPlan.of(weight.shape[0], INNER, processors=1, normed=True)  # one slice, as the decode copy's q/k/v
    assert qkv_rotary_block(head_dim) < head_dim or head_dim == 16  # 128: two programs per head
    two_kernels, fused, model = (cache_layer(positions, token_major, dtype, head_dim=head_dim) for _ in range(3))
    product = skinny_linear(x, weight, bias_, plan, None, eps)
    expected = rotary_cache_write(product, HEADS, KV_HEADS, head_dim, *norms, cos, sin, two_kernels)
    counts = qkv_rotary_counts(HEADS, KV_HEADS, x.device)
    query = qkv_rotary_write(x, weight, bias_, plan, counts, HEADS, KV_HEADS, head_dim, *norms, cos, sin, fused, eps)
    assert query.shape == (ROWS, HEADS, positions, head_dim) and query.dtype == dtype
    assert not counts.any()  # left zeroed for the next call
    tolerance = {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 2e-3, "rtol": 2e-3}
    torch.testing.assert_close(query, expected, **tolerance)
    for got, want in zip(fused.buffers, two_kernels.buffers):
        assert torch.equal(got.isnan(), want.isnan())  # the step's columns written, no other
        torch.testing.assert_close(got, want, equal_nan=True, **tolerance)
    # and the model's operations: F.linear of the normalised rows, then the norms, rotation and cache update
    inputs = rms_normalized(x, eps) if folded else x
    shape = (ROWS, positions, -1, head_dim)
    q, k, v = (part.view(shape) for part in torch.nn.functional.linear(inputs, weight, bias_).split(
        [HEADS * head_dim, KV_HEADS * head_dim, KV_HEADS * head_dim], -1))
    if qk_norms:
        q, k = norms[0](q), norms[1](k)
    q, k = modeling_qwen3.apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
    model.update(k, v.transpose(1, 2))
    loose = {"atol": 1e-4, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
    torch.testing.assert_close(query, q, **loose)
    for got, want in zip(fused.buffers, model.buffers):
        torch.testing.assert_close(got, want, equal_nan=True, **loose)


@needs_interpreter
def test_the_kernel_refuses_more_tokens_than_a_tile_another_width_and_one_norm_alone():
    x, weight, _, norms, cos, sin = layer_inputs(1, 16, True, False, torch.float32)
    plan, counts = SplitPlan.of(weight.shape[0], INNER, 1, True), qkv_rotary_counts(HEADS, KV_HEADS, x.device)
    layer = cache_layer(1, False, torch.float32)
    with pytest.raises(ValueError, match="not 4 \\+ 2 x 3 heads"):
        qkv_rotary_write(x, weight, None, plan, counts, HEADS, 3, 16, *norms, cos, sin, layer)
    with pytest.raises(ValueError, match="both q/k norms or neither"):
        qkv_rotary_write(x, weight, None, plan, counts, HEADS, KV_HEADS, 16, norms[0], None, cos, sin, layer)
    with pytest.raises(ValueError, match="at most 32 tokens; got 33 x 1"):
        qkv_rotary_write(x[:1].expand(33, 1, INNER), weight, None, plan, counts, HEADS, KV_HEADS, 16, *norms, cos, sin, layer)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the compiled Triton kernel needs CUDA")
@pytest.mark.parametrize("positions,token_major", [(1, False), (3, True)], ids=["one-token", "jump"])
def test_the_compiled_kernel_on_cuda_writes_what_the_two_kernels_write(positions, token_major):
    """bfloat16 on a GPU, Qwen3-4B's head dim (two programs a head), 20 rows: the two kernels' queries and cache."""
    x, weight, _, norms, cos, sin = layer_inputs(positions, 128, True, False, torch.bfloat16, "cuda")
    plan = SplitPlan.of(weight.shape[0], INNER, 132, normed=True)
    two_kernels, fused = (cache_layer(positions, token_major, torch.bfloat16, "cuda", 128) for _ in range(2))
    expected = rotary_cache_write(skinny_linear(x, weight, None, plan, None, 1e-6), HEADS, KV_HEADS, 128, *norms, cos,
                                  sin, two_kernels)
    counts = qkv_rotary_counts(HEADS, KV_HEADS, x.device)
    query = qkv_rotary_write(x, weight, None, plan, counts, HEADS, KV_HEADS, 128, *norms, cos, sin, fused, 1e-6)
    torch.testing.assert_close(query, expected, atol=0, rtol=0)  # the same rounded product, the same arithmetic
    for got, want in zip(fused.buffers, two_kernels.buffers):
        assert torch.equal(got.isnan(), want.isnan())
        torch.testing.assert_close(got, want, equal_nan=True, atol=0, rtol=0)
    assert not counts.any()
