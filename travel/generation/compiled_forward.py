"""Decoding through torch.compile: the static decode steps' model forward (hardware.compile_decode), each
prompt's prefill (hardware.compile_prefill), and where a run keeps compiled code, the updates' too
(hardware.compile_cache_dir).

A CUDA graph replays a step with one launch, but every kernel of the step still runs: about 55 per layer, most of
them elementwise kernels of a few microseconds however little they touch (RMSNorm, rotary, SiLU, the residual adds,
the attention's scale, mask, concatenation and softmax). `CompiledForward` wraps a forward function (the step's
`forward_logits`, `forward_selected_logits`, or the prefill's `forward_prompt_logits`) so that TorchInductor fuses
them into a few generated kernels per layer and keeps the matmuls on cuBLAS; it takes and returns what the wrapped
function does (the model, its inputs and cache; the logits), and the static step captures the compiled forward in
its CUDA graph as it captures the plain one.

With `hardware.compile_prefill` each prompt's prefill runs through torch.compile as well, a function of its own
(`forward_prompt_logits`) with dynamic lengths from its first call, so its sizes never make the step's dynamic; it
keeps FlashAttention in the trace through the causal attention of travel/generation/static_step.py. It makes the
first decode call of a process longer by more than it saves over a run, hence an option of its own, off by default.

The compiled function is shared by every step, model and decoder of the process. The first call compiles (once
per process and step kind); a call of new sizes (rows, prompt width) compiles once more, with dynamic sizes that
then serve every later size. Starting with dynamic sizes instead made the first compile far slower. Where compiling
fails (no compiler, an unsupported model), the step warns once and runs the plain forward. Timings:
docs/performance.md.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import torch
import torch._dynamo

from travel.generation.model_io import forward_logits, forward_prompt_logits, forward_selected_logits


class CompiledForward:
    """`function` through torch.compile with `backend`, or the plain function after a compile failure; `purpose`
    names it in that failure's warning. `recompile_limit`, where given, replaces dynamo's limit of graphs per
    function (8) during the calls: past it dynamo warns and runs the function plain. `dynamic` is torch.compile's:
    None compiles the first call's sizes as constants and dynamic ones at the first call of other sizes, True
    dynamic sizes from the first call."""

    def __init__(
        self,
        function: Any = forward_logits,
        backend: Any = "inductor",
        purpose: str = "the decode step",
        recompile_limit: int | None = None,
        dynamic: bool | None = None,
    ) -> None:
        self.function, self.backend, self.purpose, self.dynamic = function, backend, purpose, dynamic
        self.limits = {} if recompile_limit is None else {"recompile_limit": recompile_limit}
        self._compiled: Any = None
        self.failed = False
        self.compiled_calls = 0  # calls that ran the compiled function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.failed:
            if self._compiled is None:
                self._compiled = torch.compile(self.function, backend=self.backend, dynamic=self.dynamic)
            try:
                with torch._dynamo.config.patch(**self.limits):
                    result = self._compiled(*args, **kwargs)
                self.compiled_calls += 1
                return result
            except torch._dynamo.exc.TorchDynamoException as error:  # tracing or compiling failed, not the forward
                warnings.warn(f"torch.compile of {self.purpose} failed ({error}); running it without torch.compile")
                self.failed = True
        return self.function(*args, **kwargs)


def use_compile_cache(directory: str | None) -> Path | None:
    """hardware.compile_cache_dir: TorchInductor keeps its compiled graphs and their kernels in `directory`
    (`~` expanded, created) for this process and the ones it starts, so a later process that compiles the same
    graphs loads them instead (torch's own cache, keyed by graph, torch version and device). None leaves torch's
    choice: TORCHINDUCTOR_CACHE_DIR where set, else a folder in the temporary directory, which a cluster may wipe
    between jobs."""
    if directory is None:
        return None
    path = Path(os.path.expanduser(directory)).resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"hardware.compile_cache_dir={directory!r}: cannot create it ({error})") from error
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(path)
    return path


COMPILED_FORWARD = CompiledForward()
COMPILED_SELECTED_FORWARD = CompiledForward(forward_selected_logits)
# every prompt has a length of its own, so the prefill compiles dynamic lengths at once rather than a first length
# and then dynamic ones (which took longer in all)
COMPILED_PROMPT_FORWARD = CompiledForward(forward_prompt_logits, purpose="the prompt's prefill", dynamic=True)


def step_forward(compile_forward: bool) -> Any:
    """The forward a one-token static step calls: `forward_logits`' signature, compiled or not."""
    return COMPILED_FORWARD if compile_forward else forward_logits


def jump_step_forward(compile_forward: bool) -> Any:
    """The forward a jump step calls: `forward_selected_logits`' signature, compiled or not."""
    return COMPILED_SELECTED_FORWARD if compile_forward else forward_selected_logits


def prompt_forward(compile_forward: bool) -> Any:
    """The forward a prompt's prefill calls: `forward_prompt_logits`' signature, compiled or not."""
    return COMPILED_PROMPT_FORWARD if compile_forward else forward_prompt_logits
