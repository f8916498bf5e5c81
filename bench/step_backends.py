"""`bench/generation.py --step-backends`: one comma-separated item, parsed into the decoder's settings and a label.

An item is `BACKEND[:LAYOUT[:COMPUTE[:WEIGHTS]]][+OPTION...]`: the step backend (eager, static, cuda_graph), the
prompt cache's layout (`repeated`: once per candidate, `shared`: once, even for one candidate; empty: the decoder's
choice), the compute dtype (e.g. bfloat16), the decode weights (`copy`, `fused` or `folded`), then options: `+jump` (forced
runs in one step), `+compile` (the compiled forward and loop), `+prefill` (the compiled prefill), `+cublas` (the
fused layers' matmuls by cuBLAS, hardware.decode_matmul=cublas) and a prefix kernel by name (`+joint_softmax`,
`+split_triton`, ...; the last one named wins). The A/B switches of earlier kernels (torch's rotary and prefill
operations, the one-launch merge, FlashAttention for the prompt, uniform launches, pointer loads, the sorted nucleus,
counters in key order) went with the variants that lost or became the default; docs/performance.md keeps their
figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from travel.generation.options import PREFIX_KERNELS
from travel.generation.prefix_attention import prefix_kernel

OPTIONS = ("jump", "compile", "prefill", "cublas")
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
        if self.kernel != "auto":  # an explicit prefix kernel (+flex, +joint_softmax)
            label += f", prefix by {prefix_kernel(self.kernel)}"
        return label
