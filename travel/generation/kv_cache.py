"""The decode batch's KV cache: prompts prefilled one by one, merged left-padded, K rows each, with room.

transformers' DynamicLayer appends each step's keys with torch.cat, which copies the whole cache
every step (for 20 rows of a 7k-token prompt on a 4B model that is ~20 GB per step). The decoder
knows the most tokens a row can add, so after the prefill every plain DynamicLayer is replaced by a
PreallocatedLayer: one buffer of (rows, heads, width + budget, head_dim) holding each prompt's keys
right-aligned (zeros in its left padding, masked by the attention mask) and broadcast to the prompt's
K candidate rows without an intermediate copy; each step writes in place and attention reads a view
of the filled part.

Prompts are prefilled separately (plain causal attention, no padding mask, one prompt's activations
at a time); `merge_prompt_caches` then builds the batch. Caches of other layouts (sliding windows,
transformers without per-layer cache objects) are not preallocated: the decoder falls back to one
left-padded batch prefill and the cache's own batch_repeat_interleave.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

try:
    from transformers.cache_utils import DynamicLayer
except ImportError:  # transformers < 4.56 has no per-layer cache objects
    DynamicLayer = None  # type: ignore[assignment,misc]


def supports_preallocation(cache: Any) -> bool:
    """True for a cache made only of plain DynamicLayer objects (created before the prefill)."""
    layers = getattr(cache, "layers", None)
    return bool(DynamicLayer is not None and layers and all(type(layer) is DynamicLayer for layer in layers))


def _left_padded_rows(states: Sequence[torch.Tensor], repeats: int, width: int, capacity: int) -> torch.Tensor:
    """(P * repeats, H, capacity, D): prompt p's (1, H, L_p, D) states at positions width - L_p .. width - 1."""
    first = states[0]
    heads, dim = first.shape[1], first.shape[3]
    buffer = first.new_empty((len(states) * repeats, heads, capacity, dim))
    grouped = buffer.view(len(states), repeats, heads, capacity, dim)
    for prompt, prompt_states in enumerate(states):
        length = prompt_states.shape[-2]
        if length < width:
            grouped[prompt, :, :, : width - length] = 0  # masked, but must not hold NaN garbage
        grouped[prompt, :, :, width - length : width] = prompt_states[0][None]
    return buffer


if DynamicLayer is not None:

    class PreallocatedLayer(DynamicLayer):
        """A DynamicLayer backed by a buffer with spare positions; `update` writes in place (doubling if full)."""

        def __init__(self, key_buffer: torch.Tensor, value_buffer: torch.Tensor, length: int):
            super().__init__()
            self._key_buffer, self._value_buffer, self._length = key_buffer, value_buffer, length
            self.dtype, self.device = key_buffer.dtype, key_buffer.device
            self.is_initialized = True
            self._refresh_views()

        def _refresh_views(self) -> None:
            self.keys = self._key_buffer[:, :, : self._length]
            self.values = self._value_buffer[:, :, : self._length]

        def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
            raise RuntimeError("a PreallocatedLayer is created initialised")

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
            end = self._length + key_states.shape[-2]
            if end > self._key_buffer.shape[-2]:
                capacity = max(end, 2 * self._key_buffer.shape[-2])
                grown = [
                    buffer.new_empty(buffer.shape[:2] + (capacity,) + buffer.shape[3:])
                    for buffer in (self._key_buffer, self._value_buffer)
                ]
                grown[0][:, :, : self._length] = self.keys
                grown[1][:, :, : self._length] = self.values
                self._key_buffer, self._value_buffer = grown
            self._key_buffer[:, :, self._length : end] = key_states
            self._value_buffer[:, :, self._length : end] = value_states
            self._length = end
            self._refresh_views()
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self._length

        def batch_repeat_interleave(self, repeats: int) -> None:
            self._key_buffer = self._key_buffer.repeat_interleave(repeats, dim=0)
            self._value_buffer = self._value_buffer.repeat_interleave(repeats, dim=0)
            self._refresh_views()

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            self._key_buffer = self._key_buffer[indices]
            self._value_buffer = self._value_buffer[indices]
            self._refresh_views()


def merge_prompt_caches(caches: Sequence[Any], repeats: int, extra_tokens: int) -> Any:
    """One cache for the batch: prompt p's rows are p * repeats .. (p + 1) * repeats - 1, left-padded to the
    longest prompt, with `extra_tokens` free positions. Reuses (and empties) the given caches."""
    merged = caches[0]
    width = max(cache.layers[0].keys.shape[-2] for cache in caches)
    for index in range(len(merged.layers)):
        keys = [cache.layers[index].keys for cache in caches]
        values = [cache.layers[index].values for cache in caches]
        key_buffer = _left_padded_rows(keys, repeats, width, width + extra_tokens)
        value_buffer = _left_padded_rows(values, repeats, width, width + extra_tokens)
        for cache in caches:  # release the per-prompt copies layer by layer
            cache.layers[index].keys = cache.layers[index].values = None
        merged.layers[index] = PreallocatedLayer(key_buffer, value_buffer, width)
    return merged
