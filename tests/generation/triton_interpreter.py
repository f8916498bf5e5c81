"""Whether this process runs the project's Triton kernels through Triton's interpreter, and the mark for the tests
that need it.

tests/conftest.py turns the interpreter on where no CUDA device is (triton reads it once, when it is imported): there
the CPU tests run the kernels on CPU tensors. On a CUDA machine the compiled kernels take no CPU tensors, and the
CUDA tests of the same files check the compiled kernels instead."""

from __future__ import annotations

import pytest
import torch

from travel.generation.triton_varlen import triton_runs

INTERPRETING = triton_runs(torch.zeros(1))  # a CPU tensor runs through the interpreter alone
# skips only where CUDA runs: without CUDA an interpreter that is off must fail these tests, not hide them
needs_interpreter = pytest.mark.skipif(
    torch.cuda.is_available() and not INTERPRETING,
    reason="Triton's interpreter is off where CUDA runs (tests/conftest.py); the CUDA tests check the compiled kernels",
)
