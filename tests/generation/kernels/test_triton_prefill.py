"""A prefill's elementwise kernels (travel/generation/kernels/triton_prefill.py) compute what the operations they replace
compute: the norm without its weight (`rms_normalized`), SiLU(gate) * up, the rotary kernel's queries, keys and values
as fresh tensors (`rotary_split`) and the residual add in the matmul; a folded copy whose forwards run them gives the
model's logits. On the CPU Triton's interpreter runs the kernels (tests/conftest.py); on a GPU the compiled kernels
run in bfloat16."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers.activations import SiLUActivation

from tests.generation.kernels.test_fused_projections import assert_same_logits, tiny_family_model, with_norm_weights
from tests.generation.kernels.test_triton_rotary import HEAD_DIM, HEADS, KV_HEADS, ROWS, model_operations, step_inputs
from tests.generation.triton_interpreter import needs_interpreter
from travel.generation.kernels import fused_projections, skinny_matmul
from travel.generation.kernels.decode_weights import DecodeWeights
from travel.generation.kernels.skinny_matmul import rms_normalized
from travel.generation.kernels.triton_prefill import prefill_kernels_run, residual_linear, rms_rows, silu_gated
from travel.generation.kernels.triton_rotary import rotary_split

pytest.importorskip("triton", reason="triton installs on Linux x86-64 alone (the test extra brings it there)")

TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}, torch.float16: {"atol": 2e-3, "rtol": 2e-3}}


def seeded(*shape, dtype=torch.float32, device="cpu", seed=0, scale=1.0):
    return (scale * torch.randn(shape, generator=torch.Generator().manual_seed(seed))).to(device, dtype)


class CacheColumns:
    """A cache layer that keeps what `update` is given: the keys and values the model's operations produce."""

    def update(self, key, value):
        self.key, self.value = key, value


@needs_interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("width", [40, 256], ids=["width-40", "width-256"])
def test_rms_rows_is_the_norm_without_its_weight(width, dtype):
    """A width below its power-of-two block (40 of 64) masks the block's tail out of the mean."""
    x = seeded(2, 5, width, dtype=dtype, scale=3.0)
    got = rms_rows(x, 1e-5)
    assert got.shape == x.shape and got.dtype == dtype
    torch.testing.assert_close(got, rms_normalized(x, 1e-5), **TOLERANCE[dtype])


@needs_interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
def test_silu_gated_is_the_models_activation_times_up(dtype):
    """1,500 columns per half: one full block of 1,024 and a masked one."""
    width = 1500
    gate_up = seeded(3, 2, 2 * width, dtype=dtype, scale=4.0)
    gate, up = gate_up.split(width, -1)
    got = silu_gated(gate_up)
    assert got.shape == (3, 2, width) and got.dtype == dtype
    torch.testing.assert_close(got, SiLUActivation()(gate) * up, **TOLERANCE[dtype])


@needs_interpreter
def test_silu_gated_refuses_a_product_of_odd_width():
    with pytest.raises(ValueError, match="odd width 7"):
        silu_gated(torch.zeros(2, 7))


@needs_interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("normed", [True, False], ids=["qwen3-norms", "no-norms"])
def test_rotary_split_gives_the_models_queries_keys_and_values(normed, dtype):
    qkv, norms, cos, sin = step_inputs(5, normed, dtype)
    kept = CacheColumns()
    expected_query = model_operations(qkv, norms, cos, sin, kept)
    query, key, value = rotary_split(qkv, HEADS, KV_HEADS, HEAD_DIM, *norms, cos, sin)
    assert query.shape == (ROWS, HEADS, 5, HEAD_DIM) and key.shape == value.shape == (ROWS, KV_HEADS, 5, HEAD_DIM)
    for got, want in ((query, expected_query), (key, kept.key), (value, kept.value)):
        assert got.is_contiguous()
        torch.testing.assert_close(got, want, **TOLERANCE[dtype])


def test_residual_linear_adds_the_residual_to_the_product():
    x, weight, residual = seeded(2, 3, 8, seed=1), seeded(6, 8, seed=2), seeded(2, 3, 6, seed=3)
    torch.testing.assert_close(residual_linear(x, weight, residual), residual + F.linear(x, weight))


def test_the_kernels_do_not_run_on_cpu_tensors():
    assert not prefill_kernels_run(torch.zeros(2, 4, dtype=torch.bfloat16))  # a CPU tensor: the model's operations


@needs_interpreter
@pytest.mark.parametrize("family", ["qwen3", "llama", "llama_bias"])
def test_a_folded_copy_with_the_prefill_kernels_computes_the_models_logits(family, monkeypatch):
    """The kernels run where a GPU prefill would run them (the interpreter here): Qwen3's per-head q/k norms, Llama
    without them, and biases on every projection (whose o and down products keep the separate residual add)."""
    calls = []
    counted = lambda x: calls.append(tuple(x.shape)) or True  # noqa: E731
    monkeypatch.setattr(skinny_matmul, "prefill_kernels_run", counted)
    monkeypatch.setattr(fused_projections, "prefill_kernels_run", counted)
    model = with_norm_weights(tiny_family_model(family))
    assert_same_logits(DecodeWeights(None, "folded").refreshed(model), model)
    assert len(calls) == 2 * (4 + 1 + 1)  # per layer: four matmuls, the rotary split, the activation


def test_layers_built_for_cublas_matmuls_keep_the_models_operations(monkeypatch):
    """hardware.decode_matmul=cublas runs no project kernel in the layers, the prefill's included."""
    calls = []
    counted = lambda x: calls.append(tuple(x.shape)) or True  # noqa: E731
    monkeypatch.setattr(skinny_matmul, "prefill_kernels_run", counted)
    monkeypatch.setattr(fused_projections, "prefill_kernels_run", counted)
    model = with_norm_weights(tiny_family_model("qwen3"))
    assert_same_logits(DecodeWeights(None, "folded", "cublas").refreshed(model), model)
    assert calls == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the compiled Triton kernels need CUDA")
def test_the_compiled_kernels_on_cuda_match_the_models_operations(monkeypatch):
    """bfloat16 on a GPU: the norm and the activation within a rounding of the model's; a folded copy's prefill
    with the kernels within bfloat16 noise of the same copy without them."""
    x = seeded(3, 300, 2560, dtype=torch.bfloat16, device="cuda", scale=3.0)
    torch.testing.assert_close(rms_rows(x, 1e-6), rms_normalized(x, 1e-6), atol=1e-2, rtol=8e-3)
    gate_up = seeded(300, 2 * 1536, dtype=torch.bfloat16, device="cuda", scale=4.0)
    gate, up = gate_up.split(1536, -1)
    torch.testing.assert_close(silu_gated(gate_up), SiLUActivation()(gate) * up, atol=1e-2, rtol=8e-3)
    model = with_norm_weights(tiny_family_model("qwen3")).to("cuda", torch.bfloat16)
    folded = DecodeWeights(None, "folded").refreshed(model)
    ids = torch.randint(0, 200, (1, 300), generator=torch.Generator().manual_seed(1)).cuda()
    assert prefill_kernels_run(torch.zeros(1, dtype=torch.bfloat16, device="cuda"))
    with torch.no_grad():
        with_kernels = folded(input_ids=ids).logits.float()
        for module in (skinny_matmul, fused_projections):  # the model's own operations instead
            monkeypatch.setattr(module, "prefill_kernels_run", lambda x: False)
        without = folded(input_ids=ids).logits.float()
    assert not torch.equal(with_kernels, without)  # the kernels ran: one rounding less in the residual adds
    torch.testing.assert_close(with_kernels, without, atol=5e-2, rtol=5e-2)
