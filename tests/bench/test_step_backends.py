"""`bench/generation.py --step-backends` items (bench/step_backends.py): the decoder settings and label of each part."""

from __future__ import annotations

import inspect
import re

import pytest

from bench.step_backends import StepBackend
from travel.generation import StructuredDecoder
from travel.generation.options import PREFIX_KERNELS


def test_an_item_sets_every_part_it_names():
    step = StepBackend.parse(" cuda_graph:shared::fused+compile+prefill+joint_softmax ")
    assert step.decoder_settings() == {
        "step_backend": "cuda_graph", "share_prompt_cache": "always", "compute_dtype": None, "decode_weights": "fused",
        "jump_forced": False, "compile_decode": True, "compile_prefill": True, "prefix_attention": "joint_softmax",
        "decode_matmul": "split_k",
    }
    assert step.compiles
    assert step.label() == (
        "cuda_graph, prompt shared, fused q/k/v and gate/up weights, compiled forward, compiled prefill, "
        "prefix by joint_softmax"
    )


def test_a_bare_backend_keeps_the_decoders_defaults():
    settings = StepBackend.parse("static").decoder_settings()
    defaults = {name: parameter.default for name, parameter in inspect.signature(StructuredDecoder).parameters.items()}
    assert {name: settings[name] for name in settings if name != "step_backend"} == {
        name: defaults[name] for name in settings if name != "step_backend"
    }
    assert StepBackend.parse("cuda_graph:shared::fused+cublas").decoder_settings()["decode_matmul"] == "cublas"
    assert StepBackend.parse("cuda_graph:shared::fused+cublas").label().endswith("gate/up weights, matmuls by cuBLAS")
    folded = StepBackend.parse("cuda_graph:shared::folded+compile")
    assert folded.decoder_settings()["decode_weights"] == "folded"
    assert folded.label() == (
        "cuda_graph, prompt shared, fused weights, norms and residual adds folded into the matmuls, compiled forward"
    )
    assert not StepBackend.parse("static+jump").compiles
    assert StepBackend.parse("static+prefill").compiles
    assert StepBackend.parse("cuda_graph:repeated:bfloat16:copy+jump").label() == (
        "cuda_graph, prompt repeated, bfloat16 compute, bfloat16 weight copy, forced runs in one step"
    )


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("cuda_graph+fast", "unknown option +fast in 'cuda_graph+fast' (+jump, +compile, +prefill, +cublas, +"
                            + ", +".join(PREFIX_KERNELS)),
        ("static:once", "unknown prompt layout 'once' in 'static:once' (repeated, shared)"),
    ],
)
def test_an_unknown_part_is_named(item, message):
    with pytest.raises(SystemExit, match=re.escape(message)):
        StepBackend.parse(item)
