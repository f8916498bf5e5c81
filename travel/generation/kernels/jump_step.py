"""Multi-token decode steps: each row feeds up to W tokens in one fixed-shape forward (generation.jump_forced).

Most tokens of a role action are forced (`"}, {"day": 2, "field": "lunch", "value": "`); the one-token steps
spend a forward on each. Here a row feeds all the tokens it emits in a loop iteration (travel/generation/
decode_loop.py: one value token, or a whole forced run) and gets back the logits after its last one, so an
action costs about one forward per value token plus one per slot. Shapes stay fixed (W = 1 + the longest
forced sequence), so the step is captured in a CUDA graph like the one-token steps:

- each row writes its tokens' keys and values at its own cache columns (`RowPositionLayer`: its generated
  count onwards); a row's padding positions (past its count) write columns that its next real tokens
  overwrite before any query can see them;
- the additive mask (rows, 1, W, capacity) opens, for query i of a row, the row's prompt and its generated
  columns up to its i-th new token;
- the step gathers each row's hidden state after its last real token and runs the output head on those
  rows only (model_io.forward_selected_logits), not on all W positions.

`JumpDecodeStep` works over the repeated cache (each candidate its own copy of the prompt);
`SharedPrefixJumpStep` over the prompt-once cache of travel/generation/shared_prefix.py, whose attention
functions take W query positions as they take one.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from travel.generation.compiled_forward import jump_step_forward
from travel.generation.shared_prefix import shared_prefix_attention, split_prefix
from travel.generation.static_step import StaticDecodeStep, aligned_capacity

try:
    from travel.generation.static_step import StaticPositionLayer
except ImportError:  # transformers < 4.56 has no per-layer cache objects
    StaticPositionLayer = None  # type: ignore[assignment,misc]

if StaticPositionLayer is not None:

    class RowPositionLayer(StaticPositionLayer):
        """Keys and values over the whole capacity; `update` writes token i of row r at column `write_index[r, i]`."""

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
            rows, kv_heads, width, head_dim = key_states.shape
            if self.token_major:
                dim, index = 1, self.write_index[:, :, None, None].expand(-1, -1, kv_heads, head_dim)
            else:
                dim, index = 2, self.write_index[:, None, :, None].expand(-1, kv_heads, -1, head_dim)
            for buffer, states in zip(self.buffers, (key_states, value_states)):
                buffer.scatter_(dim, index, self._written(states))
            return self.views()


class JumpDecodeStep(StaticDecodeStep):
    """Callable `(tokens (rows, W), counts (rows,), generated (rows,)) -> (rows, vocab)` float32 logits after each
    row's last real token (overwritten by the next call), over a merged preallocated cache
    (`merge_prompt_caches`, capacity from `aligned_capacity(width, new_tokens + W)`); `attention` is the
    (rows, width) prompt mask."""

    def __init__(
        self, model: Any, cache: Any, cache_name: str, attention: torch.Tensor, prompt_lengths: torch.Tensor, width: int,
        cuda_graph: bool = False,
    ):
        rows, prompt_width = attention.shape
        capacity = cache.layers[0]._key_buffer.shape[-2]
        prompt_bias = torch.full((rows, 1, 1, capacity), float("-inf"), dtype=cache.layers[0]._key_buffer.dtype,
                                 device=attention.device)
        prompt_bias[:, 0, 0, :prompt_width].masked_fill_(attention.bool(), 0.0)
        columns = torch.zeros((rows, width), dtype=torch.long, device=attention.device)
        for index, layer in enumerate(cache.layers):
            for buffer in (layer._key_buffer, layer._value_buffer):
                buffer[:, :, prompt_width:] = 0  # masked, but 0 * NaN garbage would still poison the output
            cache.layers[index] = RowPositionLayer(layer._key_buffer, layer._value_buffer, columns)
        self._start(model, cache, cache_name, prompt_bias, columns, prompt_width, prompt_lengths, width, cuda_graph)

    def _start(self, model, cache, cache_name, prompt_bias, columns, first_column, prompt_lengths, width, cuda_graph):
        """`prompt_bias` (rows, 1, 1, capacity): 0 where a row may always attend (its prompt), -inf elsewhere; the
        generated tokens start at column `first_column`."""
        device = prompt_bias.device
        self.model, self.cache, self.cache_name = model, cache, cache_name
        self.prompt_bias, self.columns, self.first_column = prompt_bias, columns, first_column
        self.prompt_lengths, self.width = prompt_lengths, width
        rows, capacity = prompt_bias.shape[0], prompt_bias.shape[-1]
        self.generated_index = torch.arange(capacity, device=device) - first_column  # per column; < 0: the prompt
        self.offsets = torch.arange(width, device=device)
        self.input_ids = torch.zeros((rows, width), dtype=torch.long, device=device)
        self.positions = torch.zeros((rows, width), dtype=torch.long, device=device)
        self.bias = prompt_bias.new_zeros((rows, 1, width, capacity))
        self.use_graph = cuda_graph and device.type == "cuda"
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None
        self.last = torch.zeros((rows,), dtype=torch.long, device=device)  # each row's last real token
        self.forward = jump_step_forward(False)

    def compile_forward(self) -> None:
        self.forward = jump_step_forward(True)

    def _forward(self) -> torch.Tensor:
        return self.forward(self.model, self.input_ids, self.bias, self.positions, self.cache, self.cache_name, self.last)

    def __call__(self, tokens: torch.Tensor, counts: torch.Tensor, generated: torch.Tensor) -> torch.Tensor:
        # (rows, W): each query's generated-token index; the loop keeps it under max_new_tokens + W, the capacity
        index = generated[:, None] + self.offsets[None, :]
        self.input_ids.copy_(tokens)
        torch.add(self.prompt_lengths[:, None], index, out=self.positions)
        torch.add(index, self.first_column, out=self.columns)
        visible = (self.generated_index[None, None, :] >= 0) & (self.generated_index[None, None, :] <= index[:, :, None])
        self.bias.copy_(torch.where(visible[:, None], torch.zeros_like(self.bias), self.prompt_bias.expand_as(self.bias)))
        torch.clamp(counts - 1, min=0, out=self.last)
        return self._run()


class SharedPrefixJumpStep(JumpDecodeStep):
    """`JumpDecodeStep` over a prompt-once cache (`merge_prompt_caches(caches, 1, 0)`): `attention` is the
    (prompts, width) prompt mask, `prompt_lengths` the (rows,) lengths of each prompt's `repeats` rows, and
    `kernel` the prefix attention's (a name of `options.PREFIX_KERNELS`)."""

    def __init__(
        self, model: Any, cache: Any, cache_name: str, attention: torch.Tensor, prompt_lengths: torch.Tensor,
        repeats: int, new_tokens: int, width: int, cuda_graph: bool = False, kernel: str = "joint_softmax",
    ):
        prompts = attention.shape[0]
        capacity = aligned_capacity(0, new_tokens + width)
        columns = torch.zeros((prompts * repeats, width), dtype=torch.long, device=attention.device)
        suffix_layer = lambda k, v, token_major: RowPositionLayer(k, v, columns, token_major)  # noqa: E731
        self.prefix = split_prefix(cache, attention, repeats, capacity, suffix_layer, kernel, width)
        dtype = self.prefix.layers[0][0].dtype
        # the suffix holds generated tokens only: nothing is visible before a row writes it
        none = torch.full((prompts * repeats, 1, 1, capacity), float("-inf"), dtype=dtype, device=attention.device)
        self._start(model, cache, cache_name, none, columns, 0, prompt_lengths, width, cuda_graph)

    def __call__(self, tokens: torch.Tensor, counts: torch.Tensor, generated: torch.Tensor) -> torch.Tensor:
        if self.prefix.written is not None:  # a row writes W columns from its generated count on
            self.prefix.written.lengths.copy_(generated + self.width)
        return super().__call__(tokens, counts, generated)

    def attention(self) -> contextlib.AbstractContextManager[None]:
        return shared_prefix_attention(self.model, self.prefix)
