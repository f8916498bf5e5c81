"""Decoder layers whose input projections read one matrix each: q/k/v in one, gate/up in one (decode_weights=fused).

A decode step multiplies a few rows by every weight matrix, so each matmul costs about the time to read its matrix,
and a small matrix reads far below the GPU's bandwidth (the k and v projections of a 4B model are 5 MB each).
Reading the three (and the two) as one matrix is one matmul of the same bytes, whose outputs are the separate
products side by side.

`FusedStorage.of(model, dtype)` allocates the fused matrices (and biases) of every layer and hands out each
projection's weight as a view into them; the decode copy of the weights (travel/generation/kernels/decode_weights.py) takes
those views as its projections' parameters, so refreshing the copy from the master weights fills the fused matrices.
`install` then wraps each layer's attention and MLP of the copy: `FusedAttention` is transformers' attention of the
Llama family (Llama, Qwen2, Qwen3: optional q/k norms and biases) with the three projections as one, `FusedMLP` the
gated MLP with gate and up as one; norms, rotary embedding, the cache, the attention function (the decoder's
registered ones included) and the output projections' weights are the wrapped module's own. Their four matmuls run
through `DecodeMatmul`: in a decode step on a GPU, a split-K Triton kernel (hardware.decode_matmul,
travel/generation/kernels/skinny_matmul.py). With that kernel, a decode step's q/k norms, rotary embedding and cache writes
run as one Triton kernel too (travel/generation/kernels/triton_rotary.py), where the step's cache says which columns it writes.

decode_weights=folded goes one step further: `install(..., fold=True)` makes each layer a `FoldedLayer`, whose
RMSNorms' weights are multiplied into the fused matrices at every refresh (`FusedStorage.fold_norms`) and whose
norms' 1/rms and residual adds the kernel computes inside the q/k/v, gate/up, o and down matmuls. Between a layer's
matmuls the compiled step then runs no norm kernels. In that copy the fused matrices hold the folded weights, so its
layers are computed by `FoldedLayer` alone (the wrapped modules' own forwards would skip the norms).
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass, field
from typing import Any

import torch

from travel.generation.kernels.skinny_matmul import DecodeMatmul
from travel.generation.static_step import static_layer
from travel.generation.kernels.triton_prefill import prefill_kernels_run, silu_gated
from travel.generation.kernels.triton_rotary import rotary_cache_runs, rotary_cache_write, rotary_split

FUSABLE_ATTENTION = ("LlamaAttention", "Qwen2Attention", "Qwen3Attention")
FUSABLE_MLP = ("LlamaMLP", "Qwen2MLP", "Qwen3MLP")
QKV, GATE_UP = ("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")
FOLDABLE_LAYERS = ("LlamaDecoderLayer", "Qwen2DecoderLayer", "Qwen3DecoderLayer")
RMS_NORMS = ("LlamaRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm")
SILU = ("SiLU", "SiLUActivation")  # torch's module and transformers' (the Llama family's act_fn "silu")


def decoder_layers(model: Any, option: str = "fused") -> list[Any]:
    """The model's decoder layers, checked to be ones `install` can fuse (else a ValueError naming the option,
    hardware.decode_weights=`option`)."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None:
        raise ValueError(f"hardware.decode_weights={option}: {type(model).__name__} has no model.layers to fuse")
    for index, layer in enumerate(layers):
        attention, mlp = type(getattr(layer, "self_attn", None)).__name__, type(getattr(layer, "mlp", None)).__name__
        if attention not in FUSABLE_ATTENTION or mlp not in FUSABLE_MLP:
            raise ValueError(
                f"hardware.decode_weights={option}: layer {index} has {attention} and {mlp}; fusing supports the "
                f"attention of {', '.join(FUSABLE_ATTENTION)} and the MLP of {', '.join(FUSABLE_MLP)}"
            )
    return list(layers)


@dataclass
class FusedMatrix:
    """One layer's fused projections: `weight` (and `bias` where they have biases), parts of `sizes` output rows."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    sizes: list[int]


@dataclass
class FusedStorage:
    """The fused q/k/v and gate/up matrices of every layer, and the view of each projection's parameter into them
    (by the id of the master's parameter: what the copy's deepcopy memo is keyed by)."""

    attention: list[FusedMatrix] = field(default_factory=list)
    mlp: list[FusedMatrix] = field(default_factory=list)
    views: dict[int, torch.nn.Parameter] = field(default_factory=dict)
    folds: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)  # (fused matrix, its norm's weight)

    @classmethod
    def of(cls, model: Any, dtype: torch.dtype | None) -> "FusedStorage":
        storage = cls()
        for layer in decoder_layers(model):
            storage.attention.append(storage._fuse([getattr(layer.self_attn, name) for name in QKV], dtype))
            storage.mlp.append(storage._fuse([getattr(layer.mlp, name) for name in GATE_UP], dtype))
        return storage

    def fold_norms(self) -> None:
        """Scale each folded matrix's inner columns by its input norm's weight (after the matrices were refreshed
        from the master weights: the fold is made again at every refresh, never twice over one)."""
        with torch.no_grad():
            for weight, norm_weight in self.folds:
                weight.mul_(norm_weight.to(weight.dtype))

    def _fuse(self, projections: list[Any], dtype: torch.dtype | None) -> FusedMatrix:
        first = projections[0].weight
        sizes = [projection.weight.shape[0] for projection in projections]
        kind = {"dtype": dtype or first.dtype, "device": first.device}
        weight = torch.empty((sum(sizes), first.shape[1]), **kind)
        with_bias = [projection.bias is not None for projection in projections]
        if any(with_bias) and not all(with_bias):
            raise ValueError("hardware.decode_weights=fused: projections of one layer differ in having a bias")
        bias = torch.empty(sum(sizes), **kind) if all(with_bias) else None
        for projection, part_weight, part_bias in zip(
            projections, weight.split(sizes), bias.split(sizes) if bias is not None else [None] * len(sizes)
        ):
            self.views[id(projection.weight)] = torch.nn.Parameter(part_weight, requires_grad=False)
            if part_bias is not None:
                self.views[id(projection.bias)] = torch.nn.Parameter(part_bias, requires_grad=False)
        return FusedMatrix(weight, bias, sizes)


class FusedAttention(torch.nn.Module):
    """`attention` (a Llama-family attention module) with its q, k and v projections read as one matrix."""

    def __init__(self, attention: Any, fused: FusedMatrix, matmul: str = "split_k", fold: bool = False):
        super().__init__()
        self.attention = attention
        if hasattr(attention, "layer_idx"):  # what the shared-prefix step finds a layer's prefix by
            self.layer_idx = attention.layer_idx
        self.register_buffer("qkv_weight", fused.weight, persistent=False)
        self.register_buffer("qkv_bias", fused.bias, persistent=False)
        self.sizes = fused.sizes
        self.qkv_matmul = DecodeMatmul(fused.weight, matmul, normed=fold)
        self.o_matmul = DecodeMatmul(attention.o_proj.weight, matmul)
        self.rotary_kernel = matmul == "split_k"  # the decode step's Triton kernels, the rotary one with the matmuls'
        modeling = sys.modules[type(attention).__module__]
        self.rotate, self.eager_attention = modeling.apply_rotary_pos_emb, modeling.eager_attention_forward
        self.attention_functions = modeling.ALL_ATTENTION_FUNCTIONS  # the registry the wrapped module reads

    def forward(
        self, hidden_states: torch.Tensor, position_embeddings: Any = None, attention_mask: Any = None, **kwargs: Any
    ):
        qkv = self.qkv_matmul(hidden_states, self.qkv_weight, self.qkv_bias)
        output, weights = self.attend(qkv, position_embeddings, attention_mask, **kwargs)
        return self.o_matmul(output, self.attention.o_proj.weight, self.attention.o_proj.bias), weights

    def attend(self, qkv: torch.Tensor, position_embeddings: Any = None, attention_mask: Any = None, **kwargs: Any):
        """The attention's output before the o projection, (..., heads x head dim), from the q/k/v product."""
        attention = self.attention
        cache = kwargs.pop("cache", None)  # transformers 5 names it `cache`, earlier versions `past_key_values`
        cache = kwargs.pop("past_key_values", None) if cache is None else cache
        input_shape = qkv.shape[:-1]
        cos, sin = position_embeddings
        step_layer = static_layer(cache, attention.layer_idx)
        if self.rotary_kernel and step_layer is not None and qkv.dim() == 3 and rotary_cache_runs(qkv):
            # a decode step: norms, rotation and the cache writes in one kernel (travel/generation/kernels/triton_rotary.py)
            query = rotary_cache_write(qkv, *self.heads(), *self.qk_norms(), cos, sin, step_layer)
            key, value = step_layer.views()
        else:
            query, key, value = self.split_heads(qkv, cos, sin)
            if cache is not None:
                key, value = cache.update(key, value, attention.layer_idx)
        implementation = attention.config._attn_implementation
        eager = implementation in (None, "eager")
        interface = self.eager_attention if eager else self.attention_functions[implementation]
        if getattr(attention, "sliding_window", None) is not None:
            kwargs["sliding_window"] = attention.sliding_window
        output, weights = interface(
            attention, query, key, value, attention_mask,
            dropout=0.0 if not attention.training else attention.attention_dropout, scaling=attention.scaling, **kwargs,
        )
        return output.reshape(*input_shape, -1).contiguous(), weights

    def heads(self) -> tuple[int, int, int]:
        """(query heads, key/value heads, head dim) of the q/k/v product."""
        head_dim = self.attention.head_dim
        return self.sizes[0] // head_dim, self.sizes[1] // head_dim, head_dim

    def qk_norms(self) -> tuple[Any, Any]:
        """Qwen3's per-head q and k RMSNorms, or (None, None) for a model without them."""
        return getattr(self.attention, "q_norm", None), getattr(self.attention, "k_norm", None)

    def split_heads(self, qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """`rotated`'s queries, keys and values: by the rotary kernel where an uncompiled GPU forward (a prefill) runs
        the prefill kernels (travel/generation/kernels/triton_prefill.py), else by the model's own operations."""
        if self.rotary_kernel and qkv.dim() == 3 and prefill_kernels_run(qkv):
            return rotary_split(qkv, *self.heads(), *self.qk_norms(), cos, sin)
        return self.rotated(qkv, cos, sin)

    def rotated(self, qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """The (rows, heads, positions, head dim) queries, keys and values of the q/k/v product, the queries and keys
        normalised (where the model has q/k norms) and rotated, by the model's own operations."""
        attention = self.attention
        hidden_shape = (*qkv.shape[:-1], -1, attention.head_dim)
        query, key, value = (part.view(hidden_shape) for part in qkv.split(self.sizes, -1))
        if hasattr(attention, "q_norm"):  # Qwen3 normalises each head's query and key
            query, key = attention.q_norm(query), attention.k_norm(key)
        query, key, value = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
        query, key = self.rotate(query, key, cos, sin)
        return query, key, value


class FusedMLP(torch.nn.Module):
    """`mlp` (a gated MLP: down(act(gate(x)) * up(x))) with its gate and up projections read as one matrix."""

    def __init__(self, mlp: Any, fused: FusedMatrix, matmul: str = "split_k", fold: bool = False):
        super().__init__()
        self.mlp = mlp
        self.register_buffer("gate_up_weight", fused.weight, persistent=False)
        self.register_buffer("gate_up_bias", fused.bias, persistent=False)
        self.sizes = fused.sizes
        self.gate_up_matmul = DecodeMatmul(fused.weight, matmul, normed=fold)
        self.down_matmul = DecodeMatmul(mlp.down_proj.weight, matmul)
        # SiLU(gate) * up in one kernel where a forward runs uncompiled on a GPU (travel/generation/kernels/triton_prefill.py)
        silu = type(mlp.act_fn).__name__ in SILU and fused.sizes[0] == fused.sizes[1]
        self.silu_kernel = silu and self.down_matmul.prefill_kernels

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.down(self.gate_up_matmul(hidden_states, self.gate_up_weight, self.gate_up_bias))

    def down(self, gate_up: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        """The down projection of act(gate) * up, from the gate/up product, plus `residual` where given."""
        if self.silu_kernel and prefill_kernels_run(gate_up):
            gated = silu_gated(gate_up)
        else:
            gate, up = gate_up.split(self.sizes, -1)
            gated = self.mlp.act_fn(gate) * up
        down = self.mlp.down_proj
        return self.down_matmul.folded(gated, down.weight, down.bias, residual=residual)


class FoldedLayer(torch.nn.Module):
    """A Llama-family decoder layer (`layer`, its attention and MLP fused by `install(..., fold=True)`) whose two
    RMSNorms and two residual adds live in its matmuls (decode_weights=folded): each norm's weight is folded into
    the next fused matrix (`FusedStorage.fold_norms`) and its 1 / rms into that matmul; each residual add into the
    matmul that ends its branch, o or down. In a GPU decode step the split-K kernel computes them, so the compiled
    step has no norm kernels between the layers' matmuls; elsewhere (prefills, the CPU) the same operations run one
    by one, over the same folded matrices."""

    def __init__(self, layer: Any):
        super().__init__()
        self.layer = layer
        if hasattr(layer, "attention_type"):  # what some models' forward picks a layer's mask by
            self.attention_type = layer.attention_type

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if args:
            raise TypeError("a folded decoder layer takes its arguments by name, as transformers' models pass them")
        layer = self.layer
        attention, mlp = layer.self_attn, layer.mlp
        before, after = layer.input_layernorm.variance_epsilon, layer.post_attention_layernorm.variance_epsilon
        qkv = attention.qkv_matmul.folded(hidden_states, attention.qkv_weight, attention.qkv_bias, norm_eps=before)
        output, _ = attention.attend(qkv, **kwargs)
        o_proj = attention.attention.o_proj
        hidden_states = attention.o_matmul.folded(output, o_proj.weight, o_proj.bias, residual=hidden_states)
        gate_up = mlp.gate_up_matmul.folded(hidden_states, mlp.gate_up_weight, mlp.gate_up_bias, norm_eps=after)
        return mlp.down(gate_up, residual=hidden_states)


def foldable(layer: Any) -> bool:
    """Whether `layer` is one `FoldedLayer` computes: a Llama-family decoder layer that returns its hidden states (the
    layers of transformers 4.54 and later), with RMSNorms."""
    returns = inspect.signature(type(layer).forward).return_annotation
    norms = (type(layer.input_layernorm).__name__, type(layer.post_attention_layernorm).__name__)
    return type(layer).__name__ in FOLDABLE_LAYERS and returns in (torch.Tensor, "torch.Tensor") and all(
        norm in RMS_NORMS for norm in norms
    )


def foldable_layers(model: Any) -> list[Any]:
    """`decoder_layers(model)`, checked to be layers `FoldedLayer` computes (else a ValueError naming the option)."""
    layers = decoder_layers(model, "folded")
    for index, layer in enumerate(layers):
        if not foldable(layer):
            raise ValueError(
                f"hardware.decode_weights=folded: layer {index} is a {type(layer).__name__}; folding supports the "
                f"layers of {', '.join(FOLDABLE_LAYERS)} (transformers 4.54 or later) with RMSNorms; use fused"
            )
    return layers


def layers_to_fuse(model: Any, fold: bool) -> list[Any]:
    """`foldable_layers(model)` with `fold`, else `decoder_layers(model)`: the layers `install` wraps, checked."""
    return foldable_layers(model) if fold else decoder_layers(model)


def install(model: Any, storage: FusedStorage, matmul: str = "split_k", fold: bool = False) -> None:
    """Wrap every decoder layer's attention and MLP of `model` (whose projections are `storage`'s views); `matmul`
    is hardware.decode_matmul, the kernel of their matmuls of few rows (travel/generation/kernels/skinny_matmul.py). With
    `fold` each layer becomes a `FoldedLayer`, and `storage` learns which norm weight scales which matrix."""
    layers = layers_to_fuse(model, fold)
    for index, (layer, attention, mlp) in enumerate(zip(layers, storage.attention, storage.mlp)):
        layer.self_attn = FusedAttention(layer.self_attn, attention, matmul, fold)
        layer.mlp = FusedMLP(layer.mlp, mlp, matmul, fold)
        if fold:
            storage.folds += [(attention.weight, layer.input_layernorm.weight),
                              (mlp.weight, layer.post_attention_layernorm.weight)]
            model.model.layers[index] = FoldedLayer(layer)
