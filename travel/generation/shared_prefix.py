"""Static decode steps whose K candidates of a prompt share that prompt's keys and values.

The static steps of `static_step.py` hold every prompt K times in the merged cache, and each step's
attention reads all of it: for 20 candidates of a 7k-token prompt on a 4B model that is about 20 GB
per step, most of the step's time. Here each layer keeps the prompts' keys and values once,
(prompts, kv heads, width, head dim), and every candidate's generated ones in its own suffix buffer
(rows, kv heads, capacity, head dim). A step scores a prompt's K x group query heads against its prefix
together, each candidate against its own suffix, and normalises both parts jointly (the kernels of
`prefix_attention.py`). That is the same attention (tested against the eager loop); the prefix is read
once per prompt instead of K times, and the cache holds each prompt once.

The prefix is not in the transformers cache: the model's forward only sees the suffix layers (one
`StaticPositionLayer` each, masked like the static step's cache). `shared_prefix_attention` points the
model's attention at `shared_prefix_decode_attention`, which finds its layer's prefix by `layer_idx`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from travel.generation.prefix_attention import PACKED_KERNELS, attention_kernel
from travel.generation.prefix_packing import PrefixChunks, WrittenSuffix, pack_prefix, prefix_chunks, prompt_tokens
from travel.generation.static_step import (
    StaticDecodeStep,
    StaticPositionLayer,
    aligned_capacity,
    masked_decode_step,
    per_query_mask,
    register_attention,
    transformers_sdpa,
)

SHARED_PREFIX_ATTENTION = "travel_shared_prefix_decode"


@dataclass
class PrefixState:
    """Every layer's prefix keys and values, and what the kernel needs besides: for `joint_softmax` and `flex`
    (prompts, kv heads, width, head dim) tensors under `layout`, the (prompts, 1, 1, width) float32 bias (0 over
    each prompt's tokens, -inf over its left padding); for the packed kernels (`chunked_flash`, `split_flash`)
    (tokens, kv heads, head dim) packed tensors (`pack_prefix`) cut by `layout`, a `PrefixChunks`. `written`, kept
    only for them, says how many suffix columns each row has written, with this step's tokens: the step sets its
    lengths before each forward, and those kernels read those columns alone."""

    layers: list[tuple[torch.Tensor, torch.Tensor]]
    layout: torch.Tensor | PrefixChunks
    kernel: str = "joint_softmax"  # a name in options.PREFIX_KERNELS, auto resolved
    written: WrittenSuffix | None = None
    # its function, found once here rather than in each layer's (perhaps traced) call
    attend: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.attend = attention_kernel(self.kernel)

    @property
    def prompts(self) -> int:
        return self.layout.prompts if isinstance(self.layout, PrefixChunks) else self.layout.shape[0]


_ACTIVE: PrefixState | None = None


def shared_prefix_decode_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Decode steps (one token, or a jump step's W) over a shared prefix plus each row's suffix (`key`, `value`,
    masked by `attention_mask`); anything else goes to transformers' own SDPA function."""
    state = _ACTIVE
    if state is None or not masked_decode_step(query, attention_mask, dropout):
        return transformers_sdpa(module, query, key, value, attention_mask, scaling, dropout, **kwargs)
    prefix_keys, prefix_values = state.layers[module.layer_idx]
    rows, query_heads, new_tokens, head_dim = query.shape
    kv_heads = key.shape[1]
    heads_per_kv = query_heads // kv_heads
    group = heads_per_kv * new_tokens  # queries per key/value head and row: heads x new positions (jump steps)
    scale = head_dim**-0.5 if scaling is None else scaling
    # query head h uses key/value head h // group (transformers' repeat_kv order); rows are prompt-major
    per_row = query.reshape(rows, kv_heads, group, head_dim)
    attend = state.attend
    repeats = rows // state.prompts
    if state.written is None:
        suffix_mask = per_query_mask(attention_mask, heads_per_kv).float()
        output = attend(per_row, prefix_keys, prefix_values, state.layout, key, value, suffix_mask, scale, repeats)
    else:  # the kernel reads each row's written suffix columns alone, which is what the mask opens
        output = attend(per_row, prefix_keys, prefix_values, state.layout, key, value, None, scale, repeats, state.written)
    return output.reshape(rows, query_heads, new_tokens, head_dim).transpose(1, 2), None


ATTENTION_REGISTERED = register_attention(SHARED_PREFIX_ATTENTION, shared_prefix_decode_attention)


def shared_prefix_supported(model: Any) -> bool:
    """The attention modules (`*.self_attn`, as transformers names them) must say which layer they are, to find
    that layer's prefix."""
    attention = [module for name, module in model.named_modules() if name.endswith("self_attn")]
    return ATTENTION_REGISTERED and bool(attention) and all(hasattr(module, "layer_idx") for module in attention)


def split_prefix(
    cache: Any, attention: torch.Tensor, repeats: int, capacity: int, suffix_layer: Any, kernel: str = "joint_softmax",
    positions: int = 1,
) -> PrefixState:
    """The prompt-once cache's keys and values as the shared prefix (attended by `kernel`), each cache layer
    replaced by `suffix_layer(keys, values, token_major)` over new zeroed (rows, kv heads, capacity, head dim)
    suffix buffers; for the packed kernels (`chunked_flash`, `split_flash`) they are `token_major`, (rows, capacity,
    kv heads, head dim), the layout their FlashAttention call reads a row's columns in, and a step feeds `positions`
    tokens per row. `split_flash` takes one prompt."""
    prompts, width = attention.shape
    if kernel == "split_flash" and prompts != 1:
        raise ValueError(f"prefix_attention='split_flash' attends one prompt; this call has {prompts} (use chunked_flash or auto)")
    rows = prompts * repeats
    tokens = prompt_tokens(attention) if kernel in PACKED_KERNELS else None
    prefix = []
    for index, layer in enumerate(cache.layers):
        keys, values = layer._key_buffer, layer._value_buffer
        kv_heads, head_dim = keys.shape[1], keys.shape[3]
        if tokens is None:
            prefix.append((keys, values))
            suffix = [keys.new_zeros((rows, kv_heads, capacity, head_dim)) for _ in range(2)]
        else:
            prefix.append((pack_prefix(keys, tokens), pack_prefix(values, tokens)))
            suffix = [keys.new_zeros((rows, capacity, kv_heads, head_dim)) for _ in range(2)]
        cache.layers[index] = suffix_layer(suffix[0], suffix[1], tokens is not None)
    if tokens is not None:
        lengths = torch.zeros((rows,), dtype=torch.int32, device=attention.device)
        written = WrittenSuffix.of(lengths, positions, capacity)
        per_prompt = 1 if kernel == "split_flash" else None  # split_flash splits inside its kernel
        chunks = prefix_chunks(attention, prefix[0][0].shape[1], per_prompt, one_wave=kernel == "split_triton")
        return PrefixState(prefix, chunks, kernel, written)
    prefix_bias = torch.full((prompts, 1, 1, width), float("-inf"), dtype=torch.float32, device=attention.device)
    prefix_bias[:, 0, 0].masked_fill_(attention.bool(), 0.0)
    return PrefixState(prefix, prefix_bias, kernel)


class SharedPrefixDecodeStep(StaticDecodeStep):
    """`StaticDecodeStep` over a prompt-once cache: `cache` comes from `merge_prompt_caches(caches, 1, 0)`
    (one row per prompt), `attention` is the (prompts, width) prompt mask, `prompt_lengths` the (rows,)
    lengths of the `repeats` rows of each prompt, `new_tokens` the most tokens a row generates, and `kernel`
    the prefix attention's (a name of `options.PREFIX_KERNELS`)."""

    def __init__(
        self,
        model: Any,
        cache: Any,
        cache_name: str,
        attention: torch.Tensor,
        prompt_lengths: torch.Tensor,
        repeats: int,
        new_tokens: int,
        cuda_graph: bool = False,
        kernel: str = "joint_softmax",
    ):
        prompts = attention.shape[0]
        capacity = aligned_capacity(0, new_tokens)
        write_index = torch.zeros((1,), dtype=torch.long, device=attention.device)
        suffix_layer = lambda k, v, token_major: StaticPositionLayer(k, v, write_index, token_major)  # noqa: E731
        self.prefix = split_prefix(cache, attention, repeats, capacity, suffix_layer, kernel)
        dtype = self.prefix.layers[0][0].dtype
        bias = torch.full((prompts * repeats, 1, 1, capacity), float("-inf"), dtype=dtype, device=attention.device)
        # the suffix starts empty: step s writes column s
        self._start(model, cache, cache_name, bias, write_index, 0, prompt_lengths, cuda_graph)

    def __call__(self, token: torch.Tensor, step: int) -> torch.Tensor:
        if self.prefix.written is not None:
            self.prefix.written.lengths.fill_(step + 1)  # step s writes column s
        return super().__call__(token, step)

    def attention(self) -> contextlib.AbstractContextManager[None]:
        return shared_prefix_attention(self.model, self.prefix)


@contextlib.contextmanager
def shared_prefix_attention(model: Any, prefix: PrefixState) -> Iterator[None]:
    """Inside the block the model's attention reads `prefix` through `shared_prefix_decode_attention`."""
    global _ACTIVE
    config = model.config
    previous, previous_prefix = config._attn_implementation, _ACTIVE
    config._attn_implementation, _ACTIVE = SHARED_PREFIX_ATTENTION, prefix
    try:
        yield
    finally:
        config._attn_implementation, _ACTIVE = previous, previous_prefix
