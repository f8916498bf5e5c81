"""The memory plan's table of architectures (travel/agents/architectures.py) matches the models the factories
build: layer shapes, vocabulary and the parameter count."""

from __future__ import annotations

import pytest
import torch

from travel.agents.architectures import ARCHITECTURES, architecture_of


def shape_of(config) -> dict:
    return dict(
        layers=config.num_hidden_layers, hidden=config.hidden_size, intermediate=config.intermediate_size,
        heads=config.num_attention_heads, kv_heads=config.num_key_value_heads,
        head_dim=getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads,
        vocab=config.vocab_size, tied_embeddings=bool(config.tie_word_embeddings),
    )


def check(name: str, model) -> None:
    arch = architecture_of(name)
    assert {key: getattr(arch, key) for key in shape_of(model.config)} == shape_of(model.config)
    assert arch.parameters == sum(p.numel() for p in model.parameters())
    assert arch.qk_norm == hasattr(model.model.layers[0].self_attn, "q_norm")


def test_the_tiny_random_model():
    from travel.agents.models import build_tiny_random

    check("tiny_random", build_tiny_random().model)


def test_qwen3_4b_built_on_the_meta_device():
    """Both 4B options share Qwen3-4B-Instruct-2507's shape; the meta device holds no weights."""
    from transformers import Qwen3ForCausalLM

    from travel.agents.models import qwen3_4b_config

    with torch.device("meta"):
        model = Qwen3ForCausalLM._from_config(qwen3_4b_config())
    check("random_qwen3_4b", model)
    check("qwen3_4b_instruct", model)


def test_smollm2_from_its_gguf_file():
    pytest.importorskip("gguf")
    from transformers import AutoConfig, AutoModelForCausalLM

    from travel.agents.models import ModelLoadError, smollm2_gguf_file

    try:
        path = smollm2_gguf_file()
    except ModelLoadError as missing:
        pytest.skip(str(missing))
    config = AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    check("smollm2_135m", model)


def test_every_model_option_has_an_architecture():
    from pathlib import Path

    from omegaconf import OmegaConf

    conf = Path(__file__).resolve().parents[2] / "conf" / "model"
    assert sorted(OmegaConf.load(path).name for path in conf.glob("*.yaml")) == sorted(ARCHITECTURES)
