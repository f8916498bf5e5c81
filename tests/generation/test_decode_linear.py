"""The skinny decode matmul (travel/generation/decode_linear.py), run by Triton's interpreter on CPU tensors
(TRITON_INTERPRET=1, tests/conftest.py): the product of a few rows by a weight matrix, every split of the inner
dimension and tile, ragged sizes included; `F.linear` where the kernel does not apply; and the fused decode copy
reading its projections through it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from travel.generation import decode_linear as module
from travel.generation.decode_linear import MAX_ROWS, SkinnyConfig, decode_linear, skinny_config, skinny_matmul, skinny_runs


def halves(rows: int, out_features: int, in_features: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, in_features, generator=generator).half()
    weight = (torch.randn(out_features, in_features, generator=generator) / in_features**0.5).half()
    return x, weight


@pytest.mark.parametrize(
    ("rows", "out_features", "in_features", "config"),
    [
        (1, 96, 256, SkinnyConfig(block_n=32, block_k=128)),
        (3, 70, 384, SkinnyConfig(block_n=32, block_k=128, splits=2)),  # ragged column block
        (20, 64, 300, SkinnyConfig(block_n=16, block_k=128, splits=2)),  # ragged inner dimension: the last split is short
        (17, 33, 512, SkinnyConfig(block_n=64, block_k=128, splits=4)),  # 32-row tiles
        (32, 48, 640, SkinnyConfig(block_n=16, block_k=256, splits=8)),  # more splits asked than blocks of 256: three
    ],
)
def test_the_kernel_computes_the_rows_times_the_transposed_weight(rows, out_features, in_features, config):
    x, weight = halves(rows, out_features, in_features)
    assert skinny_runs(x, weight)
    got = skinny_matmul(x, weight, config)
    assert got.shape == (rows, out_features) and got.dtype == torch.float16
    torch.testing.assert_close(got.double(), x.double() @ weight.double().T, atol=2e-3, rtol=2e-3)


def test_decode_linear_adds_the_bias_and_keeps_the_leading_dimensions():
    x, weight = halves(6, 40, 256, seed=1)
    bias = torch.randn(40).half()
    got = decode_linear(x.view(2, 3, 256), weight, bias)
    assert got.shape == (2, 3, 40)
    torch.testing.assert_close(got.view(6, 40).double(), F.linear(x.double(), weight.double(), bias.double()), atol=2e-3, rtol=2e-3)


def test_decode_linear_is_f_linear_where_the_kernel_does_not_apply(monkeypatch):
    calls = []
    monkeypatch.setattr(module, "skinny_matmul", lambda *args: calls.append(args))
    x, weight = halves(MAX_ROWS + 1, 16, 64)
    assert not skinny_runs(x, weight)  # too many rows
    assert not skinny_runs(x[:2].float(), weight.float())  # full precision
    assert not skinny_runs(x[:2], weight.T.contiguous().T)  # the weight's inner dimension is not contiguous
    for args in ((x, weight), (x[:2].float(), weight.float())):
        assert torch.equal(decode_linear(*args), F.linear(*args))
    assert calls == []


@pytest.mark.parametrize(("out_features", "in_features"), [(6144, 2560), (2560, 4096), (19456, 2560), (2560, 9728), (1024, 2560)])
def test_the_tile_rule_gives_every_multiprocessor_work_and_splits_only_where_columns_do_not(out_features, in_features):
    config = skinny_config(1, out_features, in_features, processors=132)
    blocks = -(-out_features // config.block_n)
    assert blocks * config.splits >= 2 * 132 or in_features // config.splits < 1024
    if blocks >= 2 * 132:
        assert config.splits == 1
    assert in_features % config.block_k == 0


def test_the_fused_copy_in_half_precision_reads_its_projections_through_the_kernel(monkeypatch):
    from travel.agents.models import build_tiny_random
    from travel.generation.decode_weights import DecodeWeights

    tiny = build_tiny_random(seed=3)
    model = tiny.model.half()
    shapes = []
    real = module.skinny_matmul
    monkeypatch.setattr(module, "skinny_matmul", lambda x, weight, config: shapes.append(tuple(weight.shape)) or real(x, weight, config))
    fused = DecodeWeights(None, fuse=True).refreshed(model)
    tokens = torch.tensor([[5, 17, 42]])
    with torch.no_grad():
        expected = model(tokens).logits.double()
        got = fused(tokens).logits.double()
    config = model.config
    qkv = (config.num_attention_heads + 2 * config.num_key_value_heads) * config.head_dim
    per_layer = [(qkv, config.hidden_size), (config.hidden_size, config.num_attention_heads * config.head_dim),
                 (2 * config.intermediate_size, config.hidden_size), (config.hidden_size, config.intermediate_size)]
    assert shapes == per_layer * config.num_hidden_layers
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)
