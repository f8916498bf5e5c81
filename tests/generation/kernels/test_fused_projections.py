"""hardware.decode_weights=fused and folded (travel/generation/kernels/fused_projections.py): a decode copy whose layers read
q/k/v and gate/up as one matrix each (and, folded, whose norms and residual adds live in those matmuls) computes the
model's logits and decodes what the model decodes in every step kind; a model whose layers it cannot fuse or fold is
refused by name. That it follows the master weights, as the plain copy does, is tested with the copy
(tests/generation/kernels/test_decode_weights.py)."""

from __future__ import annotations

import pytest
import torch

from tests.generation.conftest import short_request
from tests.generation.triton_interpreter import needs_interpreter
from travel.agents.models import build_offline_tokenizer, build_tiny_random
from travel.generation import StructuredDecoder
from travel.generation.kernels.decode_weights import DecodeWeights
from travel.generation.kernels.fused_projections import FoldedLayer, FusedAttention, FusedMLP
from travel.generation.shared_prefix import shared_prefix_supported

SETTINGS = {"max_new_tokens": 160, "max_value_tokens": 4, "temperature": 0.9, "top_p": 0.9}


def tiny_family_model(family: str, seed: int = 4, **sizes):
    """A 2-layer model of `family` with seeded weights: `qwen3` (per-head q/k norms), `llama` (none), `qwen2`
    (q/k/v biases) and `llama_bias` (biases on every projection, the MLP's too); `sizes` replace the others' config
    sizes."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    if family == "qwen3":
        return build_tiny_random(seed=seed).model
    shape = {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512, **sizes}
    if family == "qwen2":
        config, model_class = Qwen2Config(**shape), Qwen2ForCausalLM
    else:
        config = LlamaConfig(**shape, attention_bias=family == "llama_bias", mlp_bias=family == "llama_bias")
        model_class = LlamaForCausalLM
    config._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    model = model_class(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():  # nonzero biases, so that a bias read from the wrong part shows
            parameter.add_(torch.randn_like(parameter) * 0.02)
    return model


def with_norm_weights(model, seed: int = 7):
    """`model` with its layers' norm weights drawn around 1 (a fresh model's are all 1, which folds to nothing)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in model.model.layers:
            for norm in (layer.input_layernorm, layer.post_attention_layernorm):
                norm.weight.copy_(1 + 0.3 * torch.randn(norm.weight.shape, generator=generator))
    return model


def assert_same_logits(copy, model):
    """`copy` (a decode copy of `model`) gives the model's logits for 3 rows of 11 seeded tokens."""
    ids = torch.randint(0, 200, (3, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected, got = model(input_ids=ids).logits, copy(input_ids=ids).logits
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", ["qwen3", "llama", "qwen2", "llama_bias"])
def test_the_fused_copy_computes_the_models_logits(family):
    model = tiny_family_model(family)
    fused = DecodeWeights(None, "fused").refreshed(model)
    layer = fused.model.layers[0]
    assert isinstance(layer.self_attn, FusedAttention) and isinstance(layer.mlp, FusedMLP)
    assert_same_logits(fused, model)


@needs_interpreter
@pytest.mark.parametrize("family", ["llama", "llama_bias"])
def test_the_fused_layers_matmuls_by_the_split_k_kernel_compute_the_models_logits(family, monkeypatch):
    """The kernel of hardware.decode_matmul=split_k (GPU decode steps) wired into the four matmuls of each layer, run
    here by Triton's interpreter: each matrix's own weight, bias and counters, and the model's logits. Inner sizes of
    256 and 512 take several slices of the kernel's 128 inner entries."""
    pytest.importorskip("triton", reason="triton installs on Linux x86-64 alone (the test extra brings it there)")
    from travel.generation.kernels import skinny_matmul

    model = tiny_family_model(family, hidden_size=256, intermediate_size=512)
    fused = DecodeWeights(None, "fused").refreshed(model)
    matmuls = [module for module in fused.modules() if isinstance(module, skinny_matmul.DecodeMatmul)]
    assert len(matmuls) == 4 * len(fused.model.layers)
    for matmul, weight in zip(matmuls, [w for layer in fused.model.layers for w in (
        layer.self_attn.qkv_weight, layer.self_attn.attention.o_proj.weight, layer.mlp.gate_up_weight,
        layer.mlp.mlp.down_proj.weight,
    )]):
        assert matmul.plan is None  # no plan off the GPU: F.linear, unless given one as below
        matmul.plan = skinny_matmul.SplitPlan.of(weight.shape[0], weight.shape[1], processors=32)
        matmul.counts = skinny_matmul.split_k_counts(matmul.plan, weight.shape[0], weight.device)
    assert [matmul.plan.splits for matmul in matmuls[:4]] == [2, 2, 2, 4]
    calls = []
    monkeypatch.setattr(skinny_matmul, "split_k_runs", lambda x: calls.append(x.shape) or x.numel() // x.shape[-1] <= 16)
    ids = torch.randint(0, 200, (2, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected, got = model(input_ids=ids).logits, fused(input_ids=ids).logits
    assert len(calls) == len(matmuls)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("family", ["qwen3", "llama", "qwen2", "llama_bias"])
def test_the_folded_copy_computes_the_models_logits(family):
    """Off the GPU a folded layer runs its operations one by one, over the matrices with the norms' weights in them."""
    model = with_norm_weights(tiny_family_model(family))
    folded = DecodeWeights(None, "folded").refreshed(model)
    assert all(isinstance(layer, FoldedLayer) for layer in folded.model.layers)
    master = model.model.layers[0]
    qkv = torch.cat([getattr(master.self_attn, name).weight for name in ("q_proj", "k_proj", "v_proj")])
    torch.testing.assert_close(folded.model.layers[0].layer.self_attn.qkv_weight, qkv * master.input_layernorm.weight)
    assert_same_logits(folded, model)


@needs_interpreter
@pytest.mark.parametrize("family", ["qwen3", "qwen2", "llama_bias"])
def test_folded_layers_by_the_split_k_kernel_compute_the_models_logits(family, monkeypatch):
    """The kernel computing each folded layer's norms (q/k/v, gate/up) and residual adds (o, down), run by Triton's
    interpreter with the plans a GPU of 32 processors would give: the model's logits for Qwen3's per-head q/k norms,
    Qwen2's q/k/v biases and biases on every projection; o and down in several slices. More rows than a tile run
    the operations one by one."""
    pytest.importorskip("triton", reason="triton installs on Linux x86-64 alone (the test extra brings it there)")
    from travel.generation.kernels import skinny_matmul

    sizes = {} if family == "qwen3" else {"hidden_size": 256, "intermediate_size": 512}
    model = with_norm_weights(tiny_family_model(family, **sizes))
    folded = DecodeWeights(None, "folded").refreshed(model)
    layers = [layer.layer for layer in folded.model.layers]
    matmuls = []
    for layer in layers:
        for matmul, weight, normed in ((layer.self_attn.qkv_matmul, layer.self_attn.qkv_weight, True),
                                       (layer.self_attn.o_matmul, layer.self_attn.attention.o_proj.weight, False),
                                       (layer.mlp.gate_up_matmul, layer.mlp.gate_up_weight, True),
                                       (layer.mlp.down_matmul, layer.mlp.mlp.down_proj.weight, False)):
            assert matmul.plan is None  # no plan off the GPU: the operations one by one, unless given one as below
            matmul.plan = skinny_matmul.SplitPlan.of(weight.shape[0], weight.shape[1], 32, normed)
            matmul.counts = skinny_matmul.split_k_counts(matmul.plan, weight.shape[0], weight.device)
            matmuls.append(matmul)
    assert [matmul.plan.splits for matmul in matmuls[:4]] == ([1, 1, 1, 1] if family == "qwen3" else [1, 2, 1, 4])
    monkeypatch.setattr(skinny_matmul, "split_k_runs", lambda x: x.numel() // x.shape[-1] <= skinny_matmul.MAX_ROWS)
    kernel, folds = skinny_matmul.skinny_linear, []

    def counted(x, weight, bias, plan, counts, norm_eps=None, residual=None):
        folds.append((norm_eps is not None, residual is not None))
        return kernel(x, weight, bias, plan, counts, norm_eps, residual)

    monkeypatch.setattr(skinny_matmul, "skinny_linear", counted)
    ids = torch.randint(0, 200, (2, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected, got = model(input_ids=ids).logits, folded(input_ids=ids).logits
        assert folds == [(True, False), (False, True), (True, False), (False, True)] * len(layers)
        many = torch.randint(0, 200, (3, 12), generator=torch.Generator().manual_seed(2))  # 36 rows: one by one
        torch.testing.assert_close(folded(input_ids=many).logits, model(input_ids=many).logits, rtol=1e-4, atol=1e-4)
    assert len(folds) == 4 * len(layers)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def outputs(decoder, requests, greedy):
    seeds = None if greedy else [5, 9][: len(requests)]
    groups = decoder.generate(requests, 3, greedy=greedy, return_logprobs=True, seeds=seeds)
    return [
        (c.text, c.token_ids.tolist(), c.value_mask.tolist(), round(c.logprob, 4)) for group in groups for c in group
    ]


@pytest.mark.parametrize("weights", ["fused", "folded"])
@pytest.mark.parametrize(
    "step,greedy",
    [(step, greedy) for step in ("eager", "static", "jump") for greedy in (True, False)] + [("compiled", False)],
)
def test_decoding_over_the_fused_copy_equals_decoding_the_model(step, greedy, weights):
    tiny = build_tiny_random(seed=3)
    with_norm_weights(tiny.model)
    requests = [short_request(tiny.tokenizer, agent, 3) for agent in (0, 1)]
    kind = {"step_backend": "eager" if step == "eager" else "static", "jump_forced": step == "jump"}
    if step != "eager":  # the shared-prefix step, which finds each layer's prefix by the fused attention's layer_idx
        kind["share_prompt_cache"] = "always"
    fused = StructuredDecoder(
        tiny.model, tiny.tokenizer, decode_weights=weights, compile_decode=step == "compiled", **kind, **SETTINGS
    )
    plain = StructuredDecoder(tiny.model, tiny.tokenizer, **kind, **SETTINGS)
    assert outputs(fused, requests, greedy) == outputs(plain, requests, greedy)


def test_the_fused_copy_shares_the_prompts_cache_as_the_model_does():
    tiny = build_tiny_random(seed=3)
    assert shared_prefix_supported(tiny.model)
    assert shared_prefix_supported(DecodeWeights(None, "fused").refreshed(tiny.model))


def test_the_fused_copy_in_the_compute_dtype_reads_each_projection_from_its_matrix():
    tiny = build_tiny_random(seed=3)
    fused = DecodeWeights(torch.bfloat16, "fused").refreshed(tiny.model)
    master, layer = tiny.model.model.layers[1], fused.model.layers[1]
    qkv = [getattr(master.self_attn, name).weight for name in ("q_proj", "k_proj", "v_proj")]
    gate_up = [master.mlp.gate_proj.weight, master.mlp.up_proj.weight]
    assert layer.self_attn.qkv_weight.dtype == torch.bfloat16
    assert torch.equal(layer.self_attn.qkv_weight, torch.cat(qkv).to(torch.bfloat16))
    assert torch.equal(layer.mlp.gate_up_weight, torch.cat(gate_up).to(torch.bfloat16))
    assert all(p.dtype == torch.float32 and p.requires_grad for p in tiny.model.parameters())


def test_a_copy_in_the_weights_own_dtype_holds_the_fused_matrices_alone_and_follows_replaced_parameters():
    tiny = build_tiny_random(seed=3)
    weights = DecodeWeights(None, "fused")
    fused = weights.refreshed(tiny.model)
    master = tiny.model.model.layers[0]
    assert fused.model.embed_tokens.weight is tiny.model.model.embed_tokens.weight
    assert fused.model.layers[0].self_attn.attention.o_proj.weight is master.self_attn.o_proj.weight
    assert fused.model.layers[0].mlp.mlp.down_proj.weight is master.mlp.down_proj.weight
    own = {id(buffer) for buffer in fused.buffers()} - {id(buffer) for buffer in tiny.model.buffers()}
    assert len(own) == 2 * len(tiny.model.model.layers)  # qkv and gate_up weights: the projections have no bias
    requests = [short_request(tiny.tokenizer, 1, 3)]
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, decode_weights="fused", **SETTINGS)
    before = outputs(decoder, requests, greedy=True)
    with torch.no_grad():  # a new parameter object, not new storage: the copy must not keep reading the old one
        master.self_attn.o_proj.weight = torch.nn.Parameter(master.self_attn.o_proj.weight.flip(0).clone())
    after = outputs(decoder, requests, greedy=True)
    assert after != before
    assert after == outputs(StructuredDecoder(tiny.model, tiny.tokenizer, **SETTINGS), requests, greedy=True)


def test_a_model_whose_layers_cannot_be_fused_is_refused_by_the_option():
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = build_offline_tokenizer()
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer) + 64, n_embd=32, n_layer=1, n_head=2))
    with pytest.raises(ValueError, match="hardware.decode_weights=fused: GPT2LMHeadModel has no model.layers"):
        StructuredDecoder(model, tokenizer, decode_weights="fused", **SETTINGS)


def test_a_model_whose_layers_cannot_be_folded_is_refused_by_the_option():
    tiny = build_tiny_random(seed=3)
    tiny.model.model.layers[1].post_attention_layernorm = torch.nn.LayerNorm(tiny.model.config.hidden_size)
    StructuredDecoder(tiny.model, tiny.tokenizer, decode_weights="fused", **SETTINGS)  # fusing reads no norm
    with pytest.raises(ValueError, match="hardware.decode_weights=folded: layer 1 is a Qwen3DecoderLayer; folding "
                                         "supports the layers of .* with RMSNorms; use fused"):
        StructuredDecoder(tiny.model, tiny.tokenizer, decode_weights="folded", **SETTINGS)
