"""The training forwards' decoder layers through torch.compile (hardware.compile_update).

An update's forward and backward over a packed 10k-token sequence runs, besides its matmuls and attention,
dozens of elementwise kernels per layer: RMSNorm's float32 upcast, the rotary embedding, SiLU and the gate
product, the residual adds, and each one's backward, every one a full pass over the sequence's activations.
On an H200 with a random Qwen3-4B they took about as long as all weight matmuls of the update together
(docs/performance.md). TorchInductor fuses them into a few kernels per layer and leaves the matmuls and the
attention kernels as they are.

This is regional compilation: every decoder layer runs one compiled function, the layer's class `forward`,
with the layer as its first argument. The layers share code and shapes, so it is traced once, the parameters
being inputs of the graph. The first training forward compiles it, the first one of another sequence length
once more with dynamic sizes, which then serve every later length. Activation checkpointing wraps the layer's
call as before and recomputes through the compiled forward. Only calls with gradients enabled and without a
key/value cache take the compiled function: decoding keeps the eager layers (`hardware.compile_decode`
compiles the decode steps' own forward), and so does the update over the prompt's cache, which runs where
checkpointing is off (`TrainingForward` says why). A compile failure warns once and leaves the layers eager
(travel/generation/compiled_forward.py). A deep copy of the model (the decoding copy, a frozen comparator)
keeps its layers' routing and shares the compiled function.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from travel.agents.models import decoder_layers
from travel.generation.compiled_forward import CompiledForward

COMPILE_OPTION = "hardware.compile_update=true"  # named by the error for a model without decoder layers
_COMPILED: dict[type, CompiledForward] = {}  # one compiled function per layer class, shared by every model


CACHE_ARGUMENTS = ("cache", "past_key_values", "past_key_value")  # a layer's cache argument across transformers versions


def carries_cache(kwargs: dict[str, Any]) -> bool:
    """Whether a layer call reads or writes a key/value cache."""
    return any(kwargs.get(name) is not None for name in CACHE_ARGUMENTS)


class TrainingForward:
    """A layer's `forward`: the compiled class forward for training forwards without a cache, the eager one
    otherwise. A cache layer is a different object in every layer and the attention indexes the cache by its
    layer index, a constant of the trace, so a compiled call with a cache would compile once per layer until
    dynamo's recompile limit; the update over the prompt's cache (checkpointing off) keeps the eager layers."""

    def __init__(self, layer: torch.nn.Module, compiled: CompiledForward):
        self.layer, self.compiled = layer, compiled

    def __deepcopy__(self, memo: dict[int, Any]) -> "TrainingForward":
        return TrainingForward(copy.deepcopy(self.layer, memo), self.compiled)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if torch.is_grad_enabled() and not carries_cache(kwargs):
            return self.compiled(self.layer, *args, **kwargs)
        return type(self.layer).forward(self.layer, *args, **kwargs)


def compile_update_layers(model: Any) -> None:
    """Route every decoder layer's training forward through the shared compiled function of its class."""
    for layer in decoder_layers(model, COMPILE_OPTION):
        if type(layer) not in _COMPILED:
            _COMPILED[type(layer)] = CompiledForward(type(layer).forward, purpose="the update's decoder layers")
        layer.forward = TrainingForward(layer, _COMPILED[type(layer)])


def eager_update_layers(model: Any) -> None:
    """Undo `compile_update_layers`: the layers' class forward again."""
    for layer in decoder_layers(model, COMPILE_OPTION):
        if isinstance(layer.__dict__.get("forward"), TrainingForward):
            del layer.forward


def update_layers_compiled(model: Any) -> bool:
    return any(isinstance(layer.__dict__.get("forward"), TrainingForward) for layer in decoder_layers(model, COMPILE_OPTION))
