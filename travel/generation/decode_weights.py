"""A copy of the policy's weights in the compute dtype, for decoding only (hardware.decode_weights=copy or fused).

Under `hardware.compute_dtype` alone the decoder runs over the master weights (fp32 for a small model, so
AdamW steps do not round away) inside autocast with its cast cache off (CUDA-graph capture needs that), so
every decode step casts every weight matrix again: on an H200 those casts were a large share of the
~1,600 small kernels of a SmolLM2 step. `DecodeWeights` keeps one copy of the model whose parameters are
already in the compute dtype; before each decode call it copies the master weights into it (one fused
copy, a fraction of a millisecond for a 135M model), so decoding always sees the weights as they are,
whatever changed them (optimizer steps, checkpoint loads, parking). Buffers are shared with the master.

The copy stays on the decoding device between calls: memory of the weights in the compute dtype (half the
fp32 weights for bf16). Decoding on it runs in plain bf16, which is what autocast computes for the
matmuls; the residual stream is then bf16 too, where autocast keeps it in fp32, so the two agree to bf16
rounding, not bit for bit.

`hardware.decode_weights=fused` builds the same copy (in `hardware.compute_dtype`, or in the weights' own dtype
without one) with each decoder layer's q/k/v and gate/up projections stored as one matrix, which a decode step
reads in one matmul (travel/generation/fused_projections.py). Its memory is that of a copy in either case.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from travel.generation.fused_projections import FusedStorage, install

DECODE_WEIGHTS = ("master", "copy", "fused")


class DecodeWeights:
    """`refreshed(model)` returns the compute-dtype copy of `model`, its parameters equal to the model's now.

    `dtype` None keeps each parameter's own dtype; `fuse` reads each layer's q/k/v and gate/up projections as one
    matrix (travel/generation/fused_projections.py)."""

    def __init__(self, dtype: torch.dtype | None, fuse: bool = False):
        self.dtype, self.fuse = dtype, fuse
        self._copy: Any = None
        self._targets: dict[str, torch.Tensor] = {}

    def refreshed(self, model: Any) -> Any:
        # The master's parameters are looked up at every call: parking swaps their storage (and could swap
        # the parameter objects), so nothing of them is kept between calls.
        masters = dict(model.named_parameters())
        if self._copy is None or masters.keys() != self._targets.keys() or any(
            target.device != masters[name].device for name, target in self._targets.items()
        ):
            self._build(model)
        with torch.no_grad():
            torch._foreach_copy_(list(self._targets.values()), [masters[name] for name in self._targets])
        return self._copy

    def _build(self, model: Any) -> None:
        self._copy, self._targets = None, {}  # the old copy is released before the new one is allocated
        fused = FusedStorage.of(model, self.dtype) if self.fuse else None
        memo: dict[int, Any] = {} if fused is None else dict(fused.views)  # fused projections: views into their matrix
        for parameter in model.parameters():  # tied weights are one parameter, so they stay tied
            if id(parameter) not in memo:
                dtype = self.dtype if parameter.is_floating_point() and self.dtype is not None else parameter.dtype
                memo[id(parameter)] = torch.nn.Parameter(torch.empty_like(parameter, dtype=dtype), requires_grad=False)
        for buffer in model.buffers():
            memo[id(buffer)] = buffer
        clone = copy.deepcopy(model, memo)
        clone.eval()
        targets = {name: target for name, target in clone.named_parameters()}  # the master's names, before wrapping
        if fused is not None:
            install(clone, fused)
        self._copy, self._targets = clone, targets
