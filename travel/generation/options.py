"""The decoder's option vocabularies, importable without torch: the decoder checks its settings against them,
and `mode=dry` checks the same options before anything loads (travel/run_options.py)."""

from __future__ import annotations

STEP_BACKENDS = ("auto", "eager", "static", "cuda_graph")  # generation.step_backend
PROMPT_CACHE_SHARING = ("auto", "always", "never")  # generation.share_prompt_cache
VALUE_MODES = ("free", "catalog")  # generation.values: free text, or the values of the slot's catalog
DECODE_WEIGHTS = ("master", "copy", "fused", "folded")  # hardware.decode_weights (travel/generation/kernels/decode_weights.py)
DECODE_MATMULS = ("split_k", "cublas")  # hardware.decode_matmul (travel/generation/kernels/skinny_matmul.py)
# generation.prefix_attention (travel/generation/prefix_attention.py)
PREFIX_KERNELS = ("auto", "joint_softmax", "flex", "chunked_flash", "split_flash", "chunked_triton", "split_triton")


def check_choice(option: str, value: object, choices: tuple[str, ...]) -> str:
    """`value` if it is one of `choices`, else a ValueError naming `option` and the choices."""
    if value not in choices:
        raise ValueError(f"{option}={value!r}: choose one of {', '.join(choices)}")
    return value  # type: ignore[return-value]


def check_decode_weights(layout: str, compute_dtype: object) -> str:
    """`layout` if it is a hardware.decode_weights choice that `compute_dtype` allows (a `copy` is made in it)."""
    check_choice("hardware.decode_weights", layout, DECODE_WEIGHTS)
    if layout == "copy" and compute_dtype is None:
        raise ValueError("hardware.decode_weights=copy needs hardware.compute_dtype: the dtype of the copy")
    return layout


def check_decode_matmul(matmul: str) -> str:
    """`matmul` if it is a hardware.decode_matmul choice, else a ValueError naming the option."""
    return check_choice("hardware.decode_matmul", matmul, DECODE_MATMULS)
