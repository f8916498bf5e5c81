"""`bench/generation.py --step-backends` items (bench/step_backends.py): the decoder settings and label of each part."""

from __future__ import annotations

import inspect
import re

import pytest

from bench.step_backends import StepBackend
from travel.generation import StructuredDecoder, sampling, static_step, triton_prefill, triton_rotary, triton_split
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


def test_a_switch_sets_its_kernels_flag_inside_the_block_alone():
    step = StepBackend.parse("cuda_graph:shared::folded+compile+torch_rotary+fused_merge")
    assert step.decoder_settings() == StepBackend.parse("cuda_graph:shared::folded+compile").decoder_settings()
    assert step.label().endswith("compiled forward, q/k norms and rotary by torch, attention merged in its partials launch")
    assert triton_rotary.ENABLED and not triton_split.FUSED_MERGE_ENABLED
    with pytest.raises(RuntimeError, match="inside"):
        with step.kernels_switched():
            assert not triton_rotary.ENABLED and triton_split.FUSED_MERGE_ENABLED
            raise RuntimeError("inside")
    assert triton_rotary.ENABLED and not triton_split.FUSED_MERGE_ENABLED  # restored, after an error too
    with StepBackend.parse("static+fused_merge").kernels_switched():
        assert triton_rotary.ENABLED and triton_split.FUSED_MERGE_ENABLED
    uniform = StepBackend.parse("static+uniform_launch")
    assert uniform.label().endswith("attention partials launched alike for any candidates")
    one, twenty = (1, 1, 16), (1, 20, 64)  # (prompts, candidates, query tile rows)
    with uniform.kernels_switched():
        assert not triton_split.LAUNCH_BY_CANDIDATES
        assert triton_split.partials_launch(*one) == triton_split.partials_launch(*twenty) == (triton_split.BLOCK_KEYS, 4)
    assert triton_split.LAUNCH_BY_CANDIDATES
    assert triton_split.partials_launch(*one) == (triton_split.BLOCK_KEYS, triton_split.ONE_CANDIDATE_WARPS)
    assert triton_split.partials_launch(*twenty) == (triton_split.SEVERAL_CANDIDATES_KEYS, 4)
    assert triton_split.partials_launch(10, 1, 16) == (triton_split.BLOCK_KEYS, 4)  # several prompts: not measured


# option -> (the label's end, the (module, flag) it turns off, a neighbouring (module, flag) that stays on)
OFF_SWITCHES = {
    "torch_prefill": ("prefill's elementwise operations by torch", (triton_prefill, "ENABLED"), (triton_rotary, "ENABLED")),
    "flash_prompt": ("prompt attention by FlashAttention first", (static_step, "CUDNN_PROMPT_ATTENTION"),
                     (triton_prefill, "ENABLED")),
    "pointer_prefix": ("prefix chunks loaded by pointers", (triton_split, "PREFIX_DESCRIPTORS"),
                       (triton_split, "LAUNCH_BY_CANDIDATES")),
    "sort_nucleus": ("top-p by a sort", (sampling, "COUNTED_NUCLEUS"), (triton_split, "PREFIX_DESCRIPTORS")),
    "adjacent_counters": ("nucleus counters in key order", (sampling, "SPREAD_COUNTERS"), (sampling, "COUNTED_NUCLEUS")),
}


@pytest.mark.parametrize("option", OFF_SWITCHES)
def test_a_switch_turns_its_flag_off_inside_the_block_alone(option):
    label, (module, flag), (other_module, other_flag) = OFF_SWITCHES[option]
    step = StepBackend.parse(f"static+{option}")
    assert step.label().endswith(label)
    with step.kernels_switched():
        assert not getattr(module, flag) and getattr(other_module, other_flag)
    assert getattr(module, flag)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("cuda_graph+fast", "unknown option +fast in 'cuda_graph+fast' (+jump, +compile, +prefill, +cublas, +torch_rotary, "
                            "+fused_merge, +torch_prefill, +flash_prompt, +uniform_launch, +pointer_prefix, +sort_nucleus, "
                            "+adjacent_counters, +"
                            + ", +".join(PREFIX_KERNELS)),
        ("static:once", "unknown prompt layout 'once' in 'static:once' (repeated, shared)"),
    ],
)
def test_an_unknown_part_is_named(item, message):
    with pytest.raises(SystemExit, match=re.escape(message)):
        StepBackend.parse(item)
