"""Decode steps with fixed shapes, replayed from a CUDA graph on GPUs.

A 4B model's decode step launches hundreds of small kernels from Python (36 layers of norms,
projections, rotary, attention, MLP); at 20 rows that CPU work took longer than the GPU work it
launched. A CUDA graph records the step once and replays it with one launch, but it needs every
shape and address to stay fixed, so this step differs from the eager one in three ways:

- the KV cache is the full preallocated buffer (rows, heads, capacity, head_dim); each step writes
  its keys at a device-side index (`StaticPositionLayer`) instead of growing a view;
- attention reads all `capacity` positions under an additive mask (rows, 1, 1, capacity) that is 0
  over each row's prompt and the tokens written so far and -inf elsewhere, opened one column a step;
- with that mask, transformers' SDPA path would repeat every key/value head for grouped-query
  attention (a copy of the whole cache per layer and step); `grouped_decode_attention` instead views
  the query heads that share a key/value head as that head's queries, which is exact for one new
  token and copies nothing.

`StaticDecodeStep(..., cuda_graph=True)` captures the forward at its first call (after one eager
warm-up call with the same inputs, which writes the same keys) and replays it afterwards; a model
whose forward cannot be captured falls back to the same static step without the graph, with a warning.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

from travel.generation.compiled_forward import step_forward
from travel.generation.model_io import decode_sdpa_backends

try:
    from transformers.cache_utils import DynamicLayer
except ImportError:  # transformers < 4.56 has no per-layer cache objects
    DynamicLayer = None  # type: ignore[assignment,misc]

GROUPED_DECODE_ATTENTION = "travel_grouped_decode"
CAUSAL_PROMPT_ATTENTION = "travel_causal_prompt"
STATIC_ATTENTION_IMPLEMENTATIONS = ("sdpa", "eager")
MASK_ALIGNMENT = 16  # memory-efficient attention wants the mask's last dim aligned; otherwise it pads a copy


def masked_decode_step(query: torch.Tensor, attention_mask: torch.Tensor | None, dropout: float) -> bool:
    """A decode step (one token per row, or a jump step's W) with its own 4D additive mask (rows, 1, W, capacity)
    and no dropout: what the decode attention functions serve."""
    return (
        attention_mask is not None
        and attention_mask.dim() == 4
        and attention_mask.shape[2] == query.shape[2]
        and not dropout
    )


def per_query_mask(attention_mask: torch.Tensor, group: int) -> torch.Tensor:
    """The (rows, 1, W, capacity) mask for queries grouped as (rows, kv heads, group x W, head dim): query
    g * W + i is position i. A one-token mask broadcasts as it is."""
    return attention_mask if attention_mask.shape[2] == 1 else attention_mask.repeat(1, 1, group, 1)


def transformers_sdpa(module: Any, query, key, value, attention_mask, scaling, dropout, **kwargs: Any):
    """transformers' own SDPA attention function (prefill, training)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)


def grouped_decode_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers attention function: decode steps with their 4D mask attend per key/value head (no copy of
    the cache per query head); anything else (prefill, training) goes to transformers' own SDPA function."""
    if not masked_decode_step(query, attention_mask, dropout):
        return transformers_sdpa(module, query, key, value, attention_mask, scaling, dropout, **kwargs)
    batch, query_heads, width, head_dim = query.shape
    kv_heads = key.shape[1]
    group = query_heads // kv_heads
    # query head h uses key/value head h // group (transformers' repeat_kv order)
    grouped = query.reshape(batch, kv_heads, group * width, head_dim)
    mask = per_query_mask(attention_mask, group)
    output = F.scaled_dot_product_attention(grouped, key, value, attn_mask=mask, scale=scaling)
    return output.reshape(batch, query_heads, width, head_dim).transpose(1, 2), None


def causal_prompt_attention_function(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, Any]:
    """transformers attention function for one unpadded prompt into an empty cache: causal SDPA without the mask.

    transformers drops an all-ones causal mask where it can read the mask's values, which a traced forward
    (torch.compile) cannot, so the trace keeps the mask and SDPA with a mask runs the memory-efficient kernel, several
    times slower than FlashAttention over a long prompt. Queries over keys of another length (a cache that held
    tokens already) and sliding-window layers keep the mask. Without it, cuDNN's kernel goes first
    (`prompt_sdpa_backends`, the faster prefill: docs/performance.md)."""
    plain_causal = query.shape[2] == key.shape[2] and getattr(module, "sliding_window", None) is None
    mask = None if plain_causal else attention_mask
    with prompt_sdpa_backends(query, plain_causal):
        return transformers_sdpa(module, query, key, value, mask, scaling, dropout, **kwargs)


def prompt_sdpa_backends(query: torch.Tensor, plain_causal: bool) -> contextlib.AbstractContextManager[Any]:
    """SDPA's backends for a `plain_causal` (maskless) prompt on CUDA, cuDNN's attention first (faster for the
    prompt than FlashAttention first: docs/performance.md), else a no-op (the decoder's own choice, which leaves cuDNN out for its decode steps). Kept out of a traced
    forward, where the compiled prefill picks its kernel itself."""
    if not plain_causal or query.device.type != "cuda" or torch.compiler.is_compiling():
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.CUDNN_ATTENTION, *decode_sdpa_backends()], set_priority=True)


def register_attention(name: str, function: Any) -> bool:
    """Make `function` selectable as `config._attn_implementation = name`; False on transformers without
    an attention registry."""
    try:
        from transformers import AttentionInterface
    except ImportError:
        return False
    AttentionInterface.register(name, function)
    return True


ATTENTION_REGISTERED = register_attention(GROUPED_DECODE_ATTENTION, grouped_decode_attention) and register_attention(
    CAUSAL_PROMPT_ATTENTION, causal_prompt_attention_function
)


def supports_static_steps(model: Any) -> bool:
    config = getattr(model, "config", None)
    return (
        ATTENTION_REGISTERED
        and DynamicLayer is not None
        and getattr(config, "_attn_implementation", None) in STATIC_ATTENTION_IMPLEMENTATIONS
    )


@contextlib.contextmanager
def attention_implementation(model: Any, name: str) -> Iterator[None]:
    """The model's attention goes through the registered function `name` inside the block."""
    config = model.config
    previous = config._attn_implementation
    config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = previous


def grouped_attention(model: Any) -> contextlib.AbstractContextManager[None]:
    """The model's attention goes through `grouped_decode_attention` inside the block."""
    return attention_implementation(model, GROUPED_DECODE_ATTENTION)


def causal_prompt_attention(model: Any) -> contextlib.AbstractContextManager[None]:
    """An SDPA model's prompt prefills inside the block attend through `causal_prompt_attention_function`."""
    if not ATTENTION_REGISTERED or getattr(model.config, "_attn_implementation", None) != "sdpa":
        return contextlib.nullcontext()
    return attention_implementation(model, CAUSAL_PROMPT_ATTENTION)


def aligned_capacity(width: int, extra_tokens: int) -> int:
    """Cache positions for a `width`-token prompt and `extra_tokens` more, rounded up for the mask."""
    total = width + extra_tokens
    return -(-total // MASK_ALIGNMENT) * MASK_ALIGNMENT


if DynamicLayer is not None:

    class StaticPositionLayer(DynamicLayer):
        """Keys and values over the whole capacity; `update` writes the step's token at `write_index`.

        The buffers are (rows, kv heads, capacity, head dim), or with `token_major` (rows, capacity, kv heads,
        head dim) (what FlashAttention reads); `keys` and `values` are then their (rows, kv heads, capacity,
        head dim) views. The writes go to the buffers themselves, not through those views, so a compiled step
        mutates its inputs directly in either layout."""

        def __init__(
            self, key_buffer: torch.Tensor, value_buffer: torch.Tensor, write_index: torch.Tensor, token_major: bool = False
        ):
            super().__init__()
            self.buffers, self.token_major = (key_buffer, value_buffer), token_major
            self.keys, self.values = (buffer.transpose(1, 2) if token_major else buffer for buffer in self.buffers)
            self.write_index = write_index
            self.dtype, self.device = key_buffer.dtype, key_buffer.device
            self.is_initialized = True

        def _written(self, states: torch.Tensor) -> torch.Tensor:
            """(rows, kv heads, W, head dim) states in the buffers' layout and dtype."""
            return (states.transpose(1, 2) if self.token_major else states).to(self.dtype)

        def views(self) -> tuple[torch.Tensor, torch.Tensor]:
            keys, values = self.buffers
            return (keys.transpose(1, 2), values.transpose(1, 2)) if self.token_major else (keys, values)

        def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
            raise RuntimeError("a StaticPositionLayer is created initialised")

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
            # under autocast the rotated keys come out in fp32 and the values in bf16: store both as the cache does
            dim = 1 if self.token_major else 2
            for buffer, states in zip(self.buffers, (key_states, value_states)):
                buffer.index_copy_(dim, self.write_index, self._written(states))
            return self.views()

        def get_seq_length(self) -> int:
            return int(self.keys.shape[-2])


def static_layer(cache: Any, index: int) -> Any:
    """`cache`'s layer `index` where it is a decode step's `StaticPositionLayer` (the step's columns known), else None."""
    layers = getattr(cache, "layers", None)
    if DynamicLayer is None or layers is None:
        return None
    layer = layers[index]
    return layer if isinstance(layer, StaticPositionLayer) else None


class StaticDecodeStep:
    """Callable `(token (rows,), step) -> (rows, vocab) float32 logits` over a merged preallocated cache.

    `cache` comes from `merge_prompt_caches` (capacity from `aligned_capacity`); `attention` is the
    (rows, width) prompt mask and `prompt_lengths` the (rows,) prompt lengths. The returned logits
    tensor is overwritten by the next call.
    """

    def __init__(
        self,
        model: Any,
        cache: Any,
        cache_name: str,
        attention: torch.Tensor,
        prompt_lengths: torch.Tensor,
        cuda_graph: bool = False,
    ):
        first = cache.layers[0]
        capacity = first._key_buffer.shape[-2]
        rows, width = attention.shape
        write_index = torch.full((1,), width, dtype=torch.long, device=attention.device)
        for index, layer in enumerate(cache.layers):
            for buffer in (layer._key_buffer, layer._value_buffer):
                buffer[:, :, width:] = 0  # masked, but 0 * NaN garbage would still poison the output
            cache.layers[index] = StaticPositionLayer(layer._key_buffer, layer._value_buffer, write_index)
        bias = torch.full((rows, 1, 1, capacity), float("-inf"), dtype=first._key_buffer.dtype, device=attention.device)
        bias[:, 0, 0, :width].masked_fill_(attention.bool(), 0.0)
        self._start(model, cache, cache_name, bias, write_index, width, prompt_lengths, cuda_graph)

    def _start(
        self,
        model: Any,
        cache: Any,
        cache_name: str,
        bias: torch.Tensor,
        write_index: torch.Tensor,
        first_column: int,
        prompt_lengths: torch.Tensor,
        cuda_graph: bool,
    ) -> None:
        """The step's fixed inputs: `bias` (rows, 1, 1, capacity) is the cache's additive mask, step s writes
        column `first_column + s` through `write_index`."""
        device = bias.device
        self.model, self.cache, self.cache_name = model, cache, cache_name
        self.bias, self.write_index, self.first_column = bias, write_index, first_column
        self.capacity = bias.shape[-1]
        self.prompt_lengths = prompt_lengths
        self.input_ids = torch.zeros((bias.shape[0], 1), dtype=torch.long, device=device)
        self.positions = prompt_lengths[:, None].clone()
        self.use_graph = cuda_graph and device.type == "cuda"
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None
        self.forward = step_forward(False)

    def attention(self) -> contextlib.AbstractContextManager[None]:
        """The attention setting the steps run under (entered around the whole decode loop)."""
        return grouped_attention(self.model)

    def compile_forward(self) -> None:
        """Run the model's forward through torch.compile from now on (travel/generation/compiled_forward.py)."""
        self.forward = step_forward(True)

    def _forward(self) -> torch.Tensor:
        return self.forward(self.model, self.input_ids, self.bias, self.positions, self.cache, self.cache_name, 1)[:, -1]

    def __call__(self, token: torch.Tensor, step: int) -> torch.Tensor:
        column = self.first_column + step
        if column >= self.capacity:
            raise RuntimeError(f"decode step {step} is past the cache capacity {self.capacity}")
        self.input_ids.copy_(token[:, None])
        torch.add(self.prompt_lengths, step, out=self.positions[:, 0])
        self.write_index.fill_(column)
        self.bias[:, 0, 0, column] = 0.0
        return self._run()

    def _run(self) -> torch.Tensor:
        """The step's forward over the inputs just written: eager, or replayed from its CUDA graph (captured at
        the first call)."""
        if not self.use_graph:
            return self._forward()
        if self.graph is None:
            return self._capture()
        self.graph.replay()
        return self.logits  # type: ignore[return-value]

    def _capture(self) -> torch.Tensor:
        """Warm up on a side stream, capture, and return the warm-up's logits (the replay would equal them)."""
        stream = torch.cuda.Stream(device=self.input_ids.device)
        stream.wait_stream(torch.cuda.current_stream(self.input_ids.device))
        with torch.cuda.stream(stream):
            logits = self._forward()
        torch.cuda.current_stream(self.input_ids.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                self.logits = self._forward()
        except Exception as error:  # noqa: BLE001 - any capture failure means: decode without the graph
            warnings.warn(f"CUDA graph capture of the decode step failed ({error}); decoding without graphs")
            self.use_graph = False
            torch.cuda.synchronize(self.input_ids.device)
            return logits
        self.graph = graph
        return logits
