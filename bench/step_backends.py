"""`bench/generation.py --step-backends`: one comma-separated item, parsed into the decoder's settings and a label.

An item is `BACKEND[:LAYOUT[:COMPUTE[:WEIGHTS]]][+OPTION...]`: the step backend (eager, static, cuda_graph), the
prompt cache's layout (`repeated`: once per candidate, `shared`: once, even for one candidate; empty: the decoder's
choice), the compute dtype (e.g. bfloat16), the decode weights (`copy`, `fused` or `folded`), then options: `+jump` (forced
runs in one step), `+compile` (the compiled forward and loop), `+prefill` (the compiled prefill), `+cublas` (the
fused layers' matmuls by cuBLAS, hardware.decode_matmul=cublas), a prefix kernel by name (`+joint_softmax`,
`+split_triton`, ...; the last one named wins), and switches that turn kernels off (one on) for the item's runs, so one
process times a step with and without them: `+torch_rotary` (the fused layers' q/k norms, rotary embedding and cache
writes by the model's operations instead of travel/generation/triton_rotary.py), `+fused_merge` (split_triton's
merge for one candidate in its first launch, instead of the merge kernel), `+torch_prefill` (an uncompiled
prefill's norms, activation, rotary embedding and residual adds by the model's operations instead of
travel/generation/triton_prefill.py's kernels), `+flash_prompt` (an uncompiled prefill's attention by
FlashAttention first instead of cuDNN's, static_step.CUDNN_PROMPT_ATTENTION), `+uniform_launch` (split_triton's
partials kernel with 64 keys a block and 4 warps for every candidate count, triton_split.partials_launch),
`+pointer_prefix` (split_triton's prefix chunks loaded by pointers where tensor descriptors run too,
triton_split.PREFIX_DESCRIPTORS), `+sort_nucleus` (top-p's nucleus by a sort of the scores where the logits are
16-bit floats too, instead of by their counts, sampling.COUNTED_NUCLEUS) and `+adjacent_counters` (those counts
added to counters in key order instead of spread over cache lines, sampling.SPREAD_COUNTERS).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from travel.generation import sampling, static_step, triton_prefill, triton_rotary, triton_split
from travel.generation.options import PREFIX_KERNELS
from travel.generation.prefix_attention import prefix_kernel

SWITCHES = {  # option -> (module, flag, the flag's value inside the option's block)
    "torch_rotary": (triton_rotary, "ENABLED", False),
    "fused_merge": (triton_split, "FUSED_MERGE_ENABLED", True),
    "torch_prefill": (triton_prefill, "ENABLED", False),
    "flash_prompt": (static_step, "CUDNN_PROMPT_ATTENTION", False),
    "uniform_launch": (triton_split, "LAUNCH_BY_CANDIDATES", False),
    "pointer_prefix": (triton_split, "PREFIX_DESCRIPTORS", False),
    "sort_nucleus": (sampling, "COUNTED_NUCLEUS", False),
    "adjacent_counters": (sampling, "SPREAD_COUNTERS", False),
}
OPTIONS = ("jump", "compile", "prefill", "cublas", *SWITCHES)
LAYOUTS = {"": "auto", "repeated": "never", "shared": "always"}  # the item's layout -> share_prompt_cache


@dataclass(frozen=True)
class StepBackend:
    backend: str
    layout: str
    compute: str
    weights: str
    options: frozenset[str]
    kernel: str  # the prefix kernel, "auto" unless the item names one

    @classmethod
    def parse(cls, item: str) -> "StepBackend":
        spec, *options = item.strip().split("+")
        unknown = sorted(set(options) - {*OPTIONS, *PREFIX_KERNELS})
        if unknown:
            raise SystemExit(
                f"--step-backends: unknown option +{unknown[0]} in {item.strip()!r} "
                f"(+{', +'.join(OPTIONS)}, +{', +'.join(PREFIX_KERNELS)})"
            )
        backend, _, rest = spec.partition(":")
        layout, _, rest = rest.partition(":")
        compute, _, weights = rest.partition(":")
        if layout not in LAYOUTS:
            raise SystemExit(f"--step-backends: unknown prompt layout {layout!r} in {item.strip()!r} (repeated, shared)")
        kernels = [option for option in options if option in PREFIX_KERNELS] or ["auto"]
        return cls(backend, layout, compute, weights, frozenset(options) & set(OPTIONS), kernels[-1])

    @property
    def compiles(self) -> bool:
        """Whether the decoder's first call compiles (the step, the loop or the prefill)."""
        return bool(self.options & {"compile", "prefill"})

    def decoder_settings(self) -> dict[str, Any]:
        """StructuredDecoder's keyword arguments that the item sets."""
        return {
            "step_backend": self.backend,
            "share_prompt_cache": LAYOUTS[self.layout],
            "compute_dtype": self.compute or None,
            "decode_weights": self.weights or "master",
            "jump_forced": "jump" in self.options,
            "compile_decode": "compile" in self.options,
            "compile_prefill": "prefill" in self.options,
            "prefix_attention": self.kernel,
            "decode_matmul": "cublas" if "cublas" in self.options else "split_k",
        }

    @contextlib.contextmanager
    def kernels_switched(self) -> Iterator[None]:
        """Inside the block each switch the item names (`SWITCHES`) has its flag set; each flag is restored after."""
        saved = [(module, flag, getattr(module, flag)) for module, flag, _ in SWITCHES.values()]
        try:
            for option in self.options & set(SWITCHES):
                module, flag, inside = SWITCHES[option]
                setattr(module, flag, inside)
            yield
        finally:
            for module, flag, value in saved:
                setattr(module, flag, value)

    def label(self) -> str:
        label = self.backend if not self.layout else f"{self.backend}, prompt {self.layout}"
        label += f", {self.compute} compute" if self.compute else ""
        label += f", {self.compute} weight copy" if self.weights == "copy" else ""
        label += ", fused q/k/v and gate/up weights" if self.weights == "fused" else ""
        label += ", fused weights, norms and residual adds folded into the matmuls" if self.weights == "folded" else ""
        label += ", matmuls by cuBLAS" if "cublas" in self.options else ""
        label += ", forced runs in one step" if "jump" in self.options else ""
        label += ", compiled forward" if "compile" in self.options else ""
        label += ", compiled prefill" if "prefill" in self.options else ""
        label += ", q/k norms and rotary by torch" if "torch_rotary" in self.options else ""
        label += ", attention merged in its partials launch" if "fused_merge" in self.options else ""
        label += ", prefill's elementwise operations by torch" if "torch_prefill" in self.options else ""
        label += ", prompt attention by FlashAttention first" if "flash_prompt" in self.options else ""
        label += ", attention partials launched alike for any candidates" if "uniform_launch" in self.options else ""
        label += ", prefix chunks loaded by pointers" if "pointer_prefix" in self.options else ""
        label += ", top-p by a sort" if "sort_nucleus" in self.options else ""
        label += ", nucleus counters in key order" if "adjacent_counters" in self.options else ""
        if self.kernel != "auto":  # an explicit prefix kernel (+flex, +joint_softmax)
            label += f", prefix by {prefix_kernel(self.kernel)}"
        return label
