"""Model and tokenizer loading: hub or local Qwen3, packaged SmolLM2 GGUF, and offline random models."""

from travel.agents.models import (
    LoadedModel,
    ModelLoadError,
    build_random_qwen3_4b,
    build_tiny_random,
    load_qwen3_4b_instruct,
    load_smollm2_135m,
)
from travel.agents.offline_tokenizer import build_offline_tokenizer

__all__ = [
    "LoadedModel",
    "ModelLoadError",
    "build_offline_tokenizer",
    "build_random_qwen3_4b",
    "build_tiny_random",
    "load_qwen3_4b_instruct",
    "load_smollm2_135m",
]
