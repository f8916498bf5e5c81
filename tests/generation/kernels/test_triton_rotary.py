"""The decode step's rotary kernel (travel/generation/kernels/triton_rotary.py) computes what the model's operations compute:
Qwen3's per-head q/k norms (or none, as Llama), the rotary embedding, and the cache writes of `StaticPositionLayer`
(one column for every row) and of the jump step's `RowPositionLayer` (a column per row and position), in both cache
layouts, touching no other column; the fused and folded decode copies that run it decode what the model decodes. On
the CPU Triton's interpreter runs the kernel (tests/conftest.py); on a GPU the compiled kernel runs in bfloat16."""

from __future__ import annotations

import pytest
import torch
from transformers.models.qwen3 import modeling_qwen3

from tests.generation.conftest import short_request
from tests.generation.kernels.test_fused_projections import SETTINGS, outputs, tiny_family_model, with_norm_weights
from tests.generation.triton_interpreter import needs_interpreter
from travel.generation import StructuredDecoder
from travel.generation.kernels import fused_projections
from travel.generation.kernels.jump_step import RowPositionLayer
from travel.generation.static_step import StaticPositionLayer
from travel.generation.kernels.triton_rotary import rotary_cache_write

pytest.importorskip("triton", reason="triton installs on Linux x86-64 alone (the test extra brings it there)")

HEADS, KV_HEADS, HEAD_DIM, ROWS, CAPACITY = 4, 2, 16, 3, 8


def step_inputs(positions, normed, dtype, device="cpu", seed=0):
    """A q/k/v product (rows, positions, (heads + 2 kv heads) x head dim), the q/k norms (weights drawn around 1, or
    None), and cos/sin of seeded positions as the model's rotary embedding gives them."""
    generator = torch.Generator().manual_seed(seed)
    qkv = torch.randn((ROWS, positions, (HEADS + 2 * KV_HEADS) * HEAD_DIM), generator=generator).to(device, dtype)
    norms = None, None
    if normed:
        norms = tuple(modeling_qwen3.Qwen3RMSNorm(HEAD_DIM, eps=1e-6).to(device, dtype) for _ in range(2))
        for norm in norms:
            with torch.no_grad():
                norm.weight.copy_(1 + 0.3 * torch.randn(HEAD_DIM, generator=generator))
    angles = torch.randint(0, 500, (ROWS, positions), generator=generator)[..., None].float() * (
        10000.0 ** (-torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
    angles = torch.cat((angles, angles), -1)
    return qkv, norms, angles.cos().to(device, dtype), angles.sin().to(device, dtype)


def cache_layer(positions, token_major, dtype, device="cpu"):
    """A cache layer of NaN buffers (a column the kernel must not write stays NaN): one column for every row, or,
    for a jump step, distinct columns per row and position."""
    shape = (ROWS, CAPACITY, KV_HEADS, HEAD_DIM) if token_major else (ROWS, KV_HEADS, CAPACITY, HEAD_DIM)
    buffers = [torch.full(shape, float("nan"), dtype=dtype, device=device) for _ in range(2)]
    if positions == 1:
        return StaticPositionLayer(*buffers, torch.tensor([5], device=device), token_major)
    columns = torch.tensor([[1, 2, 3], [4, 5, 6], [0, 3, 7]], device=device)[:, :positions]
    return RowPositionLayer(*buffers, columns, token_major)


def model_operations(qkv, norms, cos, sin, layer):
    """The queries by the model's operations (`FusedAttention.rotated`'s), the keys and values written by `layer`."""
    shape = (*qkv.shape[:-1], -1, HEAD_DIM)
    query, key, value = (part.view(shape) for part in qkv.split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], -1))
    if norms[0] is not None:
        query, key = norms[0](query), norms[1](key)
    query, key, value = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
    query, key = modeling_qwen3.apply_rotary_pos_emb(query, key, cos, sin)
    layer.update(key, value)
    return query


@needs_interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("token_major", [False, True], ids=["head-major", "token-major"])
@pytest.mark.parametrize("positions", [1, 3], ids=["one-token", "jump"])
@pytest.mark.parametrize("normed", [True, False], ids=["qwen3-norms", "no-norms"])
def test_the_kernel_computes_the_models_norms_rotation_and_cache_writes(normed, positions, token_major, dtype):
    qkv, norms, cos, sin = step_inputs(positions, normed, dtype)
    expected_layer, layer = cache_layer(positions, token_major, dtype), cache_layer(positions, token_major, dtype)
    expected = model_operations(qkv, norms, cos, sin, expected_layer)
    query = rotary_cache_write(qkv, HEADS, KV_HEADS, HEAD_DIM, *norms, cos, sin, layer)
    assert query.shape == (ROWS, HEADS, positions, HEAD_DIM) and query.is_contiguous() and query.dtype == dtype
    tolerance = {"atol": 1e-6, "rtol": 1e-6} if dtype == torch.float32 else {"atol": 2e-3, "rtol": 2e-3}
    torch.testing.assert_close(query, expected, **tolerance)
    for got, want in zip(layer.buffers, expected_layer.buffers):
        assert torch.equal(got.isnan(), want.isnan())  # the step's columns written, no other
        torch.testing.assert_close(got, want, equal_nan=True, **tolerance)


@needs_interpreter
def test_the_kernel_refuses_a_product_of_another_width_and_one_norm_alone():
    qkv, norms, cos, sin = step_inputs(1, True, torch.float32)
    layer = cache_layer(1, True, torch.float32)
    with pytest.raises(ValueError, match="not 4 \\+ 2 x 3 heads"):
        rotary_cache_write(qkv, HEADS, 3, HEAD_DIM, *norms, cos, sin, layer)
    with pytest.raises(ValueError, match="both q/k norms or neither"):
        rotary_cache_write(qkv, HEADS, KV_HEADS, HEAD_DIM, norms[0], None, cos, sin, layer)


@needs_interpreter
@pytest.mark.parametrize("step,weights,greedy", [("shared", "folded", False), ("jump", "fused", True)])
def test_decoding_with_the_rotary_kernel_equals_decoding_the_model(step, weights, greedy, monkeypatch):
    """The fused and folded copies' decode steps with the kernel (run by the interpreter where a GPU would run it)
    decode the model's tokens, values and log-probs, in one-token and jump steps (the other cache layout and a model
    without q/k norms: the kernel's own test). One request of 40 new tokens (34 in jump steps: the least its action
    fits in) keeps the interpreter's time short."""
    from travel.agents.models import build_offline_tokenizer

    calls = []
    monkeypatch.setattr(fused_projections, "rotary_cache_runs", lambda qkv: calls.append(qkv.shape) or True)
    model = with_norm_weights(tiny_family_model("qwen3"))
    tokenizer = build_offline_tokenizer()
    requests = [short_request(tokenizer, 0, 2)]
    kind = {"step_backend": "static", "jump_forced": step == "jump", "share_prompt_cache": "always"}
    settings = {**SETTINGS, "max_new_tokens": 40 if step == "shared" else 34}
    kernel = StructuredDecoder(model, tokenizer, decode_weights=weights, **kind, **settings)
    plain = StructuredDecoder(model, tokenizer, **kind, **settings)
    assert outputs(kernel, requests, greedy) == outputs(plain, requests, greedy)
    assert calls and all(len(shape) == 3 for shape in calls)  # the decode steps ran the kernel
    assert any(shape[1] > 1 for shape in calls) == (step == "jump")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the compiled Triton kernel needs CUDA")
@pytest.mark.parametrize("positions", [1, 3], ids=["one-token", "jump"])
@pytest.mark.parametrize("token_major", [False, True], ids=["head-major", "token-major"])
def test_the_compiled_kernel_on_cuda_matches_the_models_operations(token_major, positions):
    """bfloat16 on a GPU: within the rounding of the model's operations, which round after every one of them."""
    qkv, norms, cos, sin = step_inputs(positions, True, torch.bfloat16, "cuda")
    expected_layer = cache_layer(positions, token_major, torch.bfloat16, "cuda")
    layer = cache_layer(positions, token_major, torch.bfloat16, "cuda")
    expected = model_operations(qkv, norms, cos, sin, expected_layer)
    query = rotary_cache_write(qkv, HEADS, KV_HEADS, HEAD_DIM, *norms, cos, sin, layer)
    torch.testing.assert_close(query, expected, atol=3e-2, rtol=2e-2)
    for got, want in zip(layer.buffers, expected_layer.buffers):
        assert torch.equal(got.isnan(), want.isnan())
        torch.testing.assert_close(got, want, equal_nan=True, atol=3e-2, rtol=2e-2)
