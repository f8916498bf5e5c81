"""The static decode steps' model forward, and the seeded draws, through torch.compile (hardware.compile_decode).

A CUDA graph replays a step with one launch, but every kernel of the step still runs: for a 36-layer model
about 65 per layer, most of them tiny elementwise kernels (RMSNorm's five, rotary's dozen, SiLU, the
residual adds, the attention's scale, mask, concatenation and softmax), each a few microseconds even when it
touches a few kilobytes. On an H200 those kernels, not the weight reads, were most of a 4B model's step.
TorchInductor fuses them into a few generated kernels per layer and keeps the matmuls on cuBLAS; the static
step then captures the compiled forward in its CUDA graph as it captures the plain one.

The per-row seeded uniforms of a sampled step (travel/generation/sampling.py: a dozen int64 kernels over
rows x vocabulary) become one kernel the same way; they are integer arithmetic, so compiled they are the
same bits.

Each compiled function is shared by every step, model and decoder of the process, and compiled with dynamic
sizes: its graphs are keyed by what they depend on (the attention setting, dtypes, the model's structure),
so the rows, prompt widths and capacities of later calls, and another agent's model of the same
architecture, reuse them. The first call compiles (tens of seconds for a 4B model, once per process and
step kind). Where compiling fails (no compiler, an unsupported model), it warns once and runs plain.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch._dynamo

from travel.generation.model_io import forward_logits
from travel.generation.sampling import seeded_uniforms


class CompiledFunction:
    """`function` through torch.compile with `backend`, or the plain function after a compile failure."""

    def __init__(self, function: Any, backend: Any = "inductor") -> None:
        self.function, self.backend = function, backend
        self._compiled: Any = None
        self.failed = False

    def __call__(self, *args: Any) -> torch.Tensor:
        if not self.failed:
            if self._compiled is None:
                self._compiled = torch.compile(self.function, backend=self.backend, dynamic=True)
            try:
                return self._compiled(*args)
            except torch._dynamo.exc.TorchDynamoException as error:  # tracing or compiling failed, not the forward
                warnings.warn(f"torch.compile of {self.function.__name__} failed ({error}); decoding without it")
                self.failed = True
        return self.function(*args)


COMPILED_FORWARD = CompiledFunction(forward_logits)
COMPILED_UNIFORMS = CompiledFunction(seeded_uniforms)


def step_forward(compile_forward: bool) -> Any:
    """The forward a static step calls: `forward_logits`' signature, compiled or not."""
    return COMPILED_FORWARD if compile_forward else forward_logits


def step_uniforms(compile_draws: bool) -> Any:
    """The seeded draws of a decode step: `seeded_uniforms`' signature, compiled or not."""
    return COMPILED_UNIFORMS if compile_draws else seeded_uniforms
