"""A copy of the policy's weights in the compute dtype, for decoding only (hardware.decode_weights=copy or fused).

Under `hardware.compute_dtype` alone the decoder runs over the master weights (fp32 for a small model, so
AdamW steps do not round away) inside autocast with its cast cache off (CUDA-graph capture needs that), so
every decode step casts every weight matrix again, a kernel per matrix. `DecodeWeights` keeps one copy of the
model whose parameters are already in the compute dtype; before each decode call it copies the master weights into
it (one fused copy), so decoding always sees the weights as they are,
whatever changed them (optimizer steps, checkpoint loads, parking). Buffers are shared with the master.

The copy stays on the decoding device between calls: memory of the weights in the compute dtype (half the
fp32 weights for bf16). Decoding on it runs in plain bf16, which is what autocast computes for the
matmuls; the residual stream is then bf16 too, where autocast keeps it in fp32, so the two agree to bf16
rounding, not bit for bit.

`hardware.decode_weights=fused` builds the same copy (in `hardware.compute_dtype`, or in the weights' own dtype
without one) with each decoder layer's q/k/v and gate/up projections stored as one matrix, which a decode step
reads in one matmul (travel/generation/kernels/fused_projections.py); their matmuls of a few rows run the split-K kernel of
travel/generation/kernels/skinny_matmul.py on a GPU unless `hardware.decode_matmul=cublas`.

A parameter that is in the copy's dtype already (every one of a bf16 model's but the fused projections) is not
copied: the copy holds the master's parameter itself. So a fused copy of a bf16 model takes the memory of its
q/k/v and gate/up matrices alone.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from travel.generation.kernels.fused_projections import FusedStorage, install
from travel.generation.options import DECODE_WEIGHTS


class DecodeWeights:
    """`refreshed(model)` returns the compute-dtype copy of `model`, its parameters equal to the model's now.

    `dtype` None keeps each parameter's own dtype. `layout` is hardware.decode_weights without `master`: `copy`,
    `fused` (each layer's q/k/v and gate/up projections read as one matrix, travel/generation/kernels/fused_projections.py,
    whose layers' matmuls run `matmul`, hardware.decode_matmul) or `folded` (those layers with their norms and
    residual adds folded into the matmuls, `FoldedLayer`)."""

    def __init__(self, dtype: torch.dtype | None, layout: str = "copy", matmul: str = "split_k"):
        if layout not in DECODE_WEIGHTS[1:]:
            raise ValueError(f"hardware.decode_weights={layout!r}: a copy is one of {', '.join(DECODE_WEIGHTS[1:])}")
        self.dtype, self.layout, self.matmul = dtype, layout, matmul
        self._copy: Any = None
        self._storage: FusedStorage | None = None
        self._targets: dict[str, torch.Tensor] = {}  # the copy's own parameters, refreshed from the master's
        self._shared: dict[str, torch.nn.Parameter] = {}  # the master's parameters the copy reads as they are

    def refreshed(self, model: Any) -> Any:
        # The master's parameters are looked up at every call: parking swaps their storage (and could swap
        # the parameter objects), so nothing of them is kept between calls.
        masters = dict(model.named_parameters())
        if (
            self._copy is None
            or masters.keys() != self._targets.keys() | self._shared.keys()
            or any(target.device != masters[name].device for name, target in self._targets.items())
            or any(parameter is not masters[name] for name, parameter in self._shared.items())
        ):
            self._build(model)
        with torch.no_grad():
            torch._foreach_copy_(list(self._targets.values()), [masters[name] for name in self._targets])
        if self._storage is not None:  # a fused copy folds its norms again (none unless folded)
            self._storage.fold_norms()
        return self._copy

    def _build(self, model: Any) -> None:
        # the old copy is released before the new one is allocated
        self._copy, self._targets, self._shared, self._storage = None, {}, {}, None
        fused = FusedStorage.of(model, self.dtype) if self.layout != "copy" else None
        memo: dict[int, Any] = {} if fused is None else dict(fused.views)  # fused projections: views into their matrix
        shared: dict[str, torch.nn.Parameter] = {}
        for name, parameter in model.named_parameters():  # tied weights are one parameter, so they stay tied
            if id(parameter) in memo:
                continue
            dtype = self.dtype if parameter.is_floating_point() and self.dtype is not None else parameter.dtype
            if dtype == parameter.dtype:  # already in the copy's dtype: the copy reads the master's own parameter
                memo[id(parameter)] = shared[name] = parameter
            else:
                memo[id(parameter)] = torch.nn.Parameter(torch.empty_like(parameter, dtype=dtype), requires_grad=False)
        for buffer in model.buffers():
            memo[id(buffer)] = buffer
        clone = copy.deepcopy(model, memo)
        clone.eval()
        # the master's names, taken before the fused modules wrap the copy's
        targets = {name: target for name, target in clone.named_parameters() if name not in shared}
        if fused is not None:
            install(clone, fused, self.matmul, fold=self.layout == "folded")
        self._copy, self._targets, self._shared, self._storage = clone, targets, shared, fused
