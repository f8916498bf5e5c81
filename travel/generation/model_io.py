"""Calling a causal LM step by step with a KV cache, across transformers versions.

transformers 5 renamed the forward argument `past_key_values` to `cache`; the decoder calls models
only through these helpers so that either name works.

Structured decoding runs with the cuDNN SDPA backend disabled: its kernels are fast, but it builds a
new execution graph for every new key length, CPU time at every layer and step that made decoding CPU-bound
(docs/performance.md). Flash attention serves the causal prefill and memory-efficient attention the masked
single-token steps.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

import torch

from travel.agents.models import resolve_dtype


def cache_argument(model: Any) -> str:
    parameters = inspect.signature(model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def new_cache(model: Any) -> Any:
    from transformers import DynamicCache

    config = getattr(model, "config", None)
    try:
        return DynamicCache(config=config) if config is not None else DynamicCache()
    except TypeError:  # older transformers: DynamicCache() takes no config
        return DynamicCache()


def forward_logits(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    cache: Any,
    cache_name: str,
    keep: int,
) -> torch.Tensor:
    """(rows, keep, vocab) float32 logits of the last `keep` input positions; `cache` is extended in place."""
    output = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        use_cache=True,
        logits_to_keep=keep,
        **{cache_name: cache},
    )
    return output.logits.float()


def forward_prompt_logits(
    model: Any, input_ids: torch.Tensor, position_ids: torch.Tensor, cache: Any, cache_name: str
) -> torch.Tensor:
    """(1, vocab) float32 logits of one unpadded prompt's last position, causal attention without a padding mask;
    `cache` (empty) is filled in place."""
    return forward_logits(model, input_ids, None, position_ids, cache, cache_name, 1)[:, -1, :]


def forward_selected_logits(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    cache: Any,
    cache_name: str,
    selected: torch.Tensor,
) -> torch.Tensor:
    """(rows, vocab) float32 logits of input position `selected[r]` of each row r; `cache` is extended in place.

    The decoder's last hidden states are gathered before the output head, so the head (a vocabulary-wide
    matmul) runs once per row instead of once per input position."""
    output = model.get_decoder()(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        use_cache=True,
        **{cache_name: cache},
    )
    hidden = output.last_hidden_state
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    return model.get_output_embeddings()(hidden[rows, selected]).float()


def forward_last_logits(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    cache: Any,
    cache_name: str,
) -> torch.Tensor:
    """(rows, vocab) float32 logits of the last input position; `cache` is extended in place."""
    return forward_logits(model, input_ids, attention_mask, position_ids, cache, cache_name, 1)[:, -1, :]


class EagerDecodeStep:
    """Callable `(token (rows,), step) -> (rows, vocab) float32 logits` that grows the cache's view and the
    attention mask by one position each step (any cache, any attention implementation)."""

    def __init__(self, model: Any, cache: Any, cache_name: str, attention: torch.Tensor, prompt_lengths: torch.Tensor, new_tokens: int):
        rows, self.prompt_width = attention.shape
        extra = torch.ones((rows, new_tokens), dtype=attention.dtype, device=attention.device)
        self.full_attention = torch.cat([attention, extra], dim=1)
        self.model, self.cache, self.cache_name, self.prompt_lengths = model, cache, cache_name, prompt_lengths

    def attention(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # the model's own attention

    def __call__(self, token: torch.Tensor, step: int) -> torch.Tensor:
        return forward_last_logits(
            self.model,
            token[:, None],
            self.full_attention[:, : self.prompt_width + step + 1],
            (self.prompt_lengths + step)[:, None],
            self.cache,
            self.cache_name,
        )


def model_device(model: Any) -> torch.device:
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        return torch.device("cpu")


@contextlib.contextmanager
def decode_attention(device: torch.device) -> Iterator[None]:
    """SDPA without the cuDNN backend on CUDA (flash, memory-efficient or math kernels); a no-op elsewhere."""
    if device.type != "cuda":
        yield
        return
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel(decode_sdpa_backends()):
        yield


def decode_sdpa_backends() -> list[Any]:
    """The SDPA backends the decoder allows on CUDA, in torch's order: all but cuDNN's."""
    from torch.nn.attention import SDPBackend

    return [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def compute_autocast(device: torch.device, compute_dtype: str | None) -> contextlib.AbstractContextManager[Any]:
    """Forwards in `compute_dtype` (e.g. bfloat16) over weights kept in their own dtype, or a no-op for None.

    The weights stay the master copy (fp32 for small models, so AdamW steps do not round away) while
    matmuls and attention run in bf16, which also selects the fast flash-attention kernels on GPUs. The
    cast cache is off, as CUDA-graph capture requires; casts are captured with the step and redone on replay.
    """
    if compute_dtype is None:
        return contextlib.nullcontext()

    return torch.autocast(device.type, dtype=resolve_dtype(compute_dtype), cache_enabled=False)
