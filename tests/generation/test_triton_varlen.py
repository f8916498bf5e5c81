"""The Triton variable-length decode attention (travel/generation/triton_varlen.py) keeps FlashAttention's contract:
each sequence's queries attend its own keys (the first `used_keys` where given, causally from the end where asked),
query heads grouped over key/value heads, with the log-sum-exps the callers merge by. On the CPU Triton's
interpreter runs the kernel (tests/conftest.py); on a GPU the compiled kernel runs in bfloat16."""

from __future__ import annotations

import pytest
import torch

from tests.generation.triton_interpreter import needs_interpreter
from travel.generation.flash_calls import varlen_reference
from travel.generation.triton_varlen import query_block, triton_runs, triton_varlen

pytest.importorskip("triton", reason="triton installs on Linux x86-64 alone (the test extra brings it there)")


def sequences(tokens=9, heads=8, kv_heads=2, keys=200, dim=16, dtype=torch.float32, device="cpu", seed=0):
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(tokens, heads, dim, generator=generator).to(device=device, dtype=dtype)
    key, value = (torch.randn(keys, kv_heads, dim, generator=generator).to(device=device, dtype=dtype) for _ in range(2))
    return query, key, value


def offsets(*values, device="cpu"):
    return torch.tensor(values, dtype=torch.int32, device=device)


@needs_interpreter
def test_the_cpu_tests_run_the_kernel_itself():
    assert triton_runs(torch.zeros(1)), "TRITON_INTERPRET=1 (tests/conftest.py) runs the Triton kernel on CPU tensors"


@needs_interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("causal,used", [(False, False), (True, True), (True, False), (False, True)],
                         ids=["plain", "causal-used", "causal", "used"])
def test_each_sequence_attends_its_own_keys_like_flash_attention(causal, used, dtype):
    query, key, value = sequences(dtype=dtype)
    q_offsets, k_offsets = offsets(0, 2, 3, 9), offsets(0, 70, 71, 200)
    used_keys = offsets(65, 1, 100) if used else None  # sequence 1 uses its one key
    got, got_lse = triton_varlen(query, key, value, q_offsets, k_offsets, 6, 129, 0.3, causal, used_keys)
    expected, expected_lse = varlen_reference(query, key, value, q_offsets, k_offsets, 6, 129, 0.3, causal, used_keys)
    assert got.shape == query.shape and got.dtype == dtype and got_lse.shape == (8, 9) and got_lse.dtype == torch.float32
    tolerance = 1e-5 if dtype == torch.float32 else 2e-3
    torch.testing.assert_close(got.float(), expected.float(), atol=tolerance, rtol=tolerance)
    torch.testing.assert_close(got_lse, expected_lse, atol=1e-5, rtol=1e-5)


@needs_interpreter
def test_keys_past_the_used_ones_are_never_read():
    query, key, value = sequences()
    q_offsets, k_offsets, used_keys = offsets(0, 4, 9), offsets(0, 100, 200), offsets(37, 64)
    poisoned_key, poisoned_value = key.clone(), value.clone()
    for start, count in ((0, 37), (100, 64)):
        poisoned_key[start + count : start + 100] = float("nan")
        poisoned_value[start + count : start + 100] = float("nan")
    got, lse = triton_varlen(query, poisoned_key, poisoned_value, q_offsets, k_offsets, 5, 100, 0.3, True, used_keys)
    expected, expected_lse = varlen_reference(query, key, value, q_offsets, k_offsets, 5, 100, 0.3, True, used_keys)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse, expected_lse, atol=1e-5, rtol=1e-5)


@needs_interpreter
def test_strided_token_major_views_are_read_in_place():
    """The suffix buffers are (rows, capacity, kv heads, dim) storage; the prefix queries are a per-chunk copy. Views
    whose token stride is not heads x dim give the same attention as their contiguous copies."""
    query, key, value = sequences(tokens=6, keys=48)
    wide_key = torch.zeros(48, 3, 16)
    wide_key[:, :2] = key
    strided_key = wide_key[:, :2]  # token stride 48, not 32
    q_offsets, k_offsets = offsets(0, 3, 6), offsets(0, 20, 48)
    got, lse = triton_varlen(query, strided_key, value, q_offsets, k_offsets, 3, 28, 0.5)
    expected, expected_lse = triton_varlen(query, key.contiguous(), value, q_offsets, k_offsets, 3, 28, 0.5)
    assert torch.equal(got, expected) and torch.equal(lse, expected_lse)


@needs_interpreter
def test_a_query_that_sees_no_key_has_zero_output_and_minus_infinite_lse():
    query, key, value = sequences(tokens=2, keys=10)
    got, lse = triton_varlen(query, key, value, offsets(0, 1, 2), offsets(0, 5, 10), 1, 5, 0.3, False, offsets(0, 5))
    assert torch.equal(got[0], torch.zeros_like(got[0])) and torch.isneginf(lse[:, 0]).all() and torch.isfinite(lse[:, 1]).all()


def test_query_tiles_hold_a_sequences_queries_in_16_to_128_rows():
    assert [query_block(n) for n in (1, 4, 16, 17, 80, 128, 200)] == [16, 16, 16, 32, 128, 128, 128]


def test_bad_shapes_are_named():
    query, key, value = sequences(heads=6, kv_heads=4)
    with pytest.raises(ValueError, match="6 query heads over 4 key/value heads"):
        triton_varlen(query, key, value, offsets(0, 9), offsets(0, 200), 9, 200, 0.3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the compiled Triton kernel needs CUDA")
@pytest.mark.parametrize("tokens,heads,causal", [(16, 8, False), (1, 32, True), (8, 32, True), (80, 8, False)],
                         ids=["magrpo-chunk", "suffix", "jump-suffix", "twenty-candidates"])
def test_the_compiled_kernel_on_cuda_matches_the_reference_in_bfloat16(tokens, heads, causal):
    query, key, value = sequences(tokens=3 * tokens, heads=heads, kv_heads=8, keys=6000, dim=128, dtype=torch.bfloat16, device="cuda")
    q_offsets = offsets(0, tokens, 2 * tokens, 3 * tokens, device="cuda")
    k_offsets = offsets(0, 1500, 4000, 6000, device="cuda")
    used_keys = offsets(1500, 777, 2000, device="cuda") if causal else None
    got, lse = triton_varlen(query, key, value, q_offsets, k_offsets, tokens, 2500, 128**-0.5, causal, used_keys)
    expected, expected_lse = varlen_reference(query, key, value, q_offsets, k_offsets, tokens, 2500, 128**-0.5, causal, used_keys)
    assert (got.float() - expected.float()).abs().max().item() < 2e-2
    assert (lse - expected_lse).abs().max().item() < 1e-2


def called_device_functions(kernel):
    """(name the caller uses, function) of every Triton function `kernel` calls, transitively."""
    found, pending = [], [kernel]
    while pending:
        caller = pending.pop().fn
        for name in caller.__code__.co_names:
            symbol = caller.__globals__.get(name)
            if callable(getattr(symbol, "fn", None)) and hasattr(symbol, "run"):  # a JIT or interpreted function
                found.append((name, symbol))
                pending.append(symbol)
    return found


def test_device_functions_are_defined_under_the_names_their_kernels_call():
    """torch.compile re-emits a user kernel as source together with the `def`s of the device functions it calls, so
    a device function bound to another name than its own (`f = triton.jit(_f)`) is undefined in the compiled step."""
    from travel.generation import triton_split, triton_varlen
    from travel.generation.kernels import skinny_matmul, triton_rotary

    kernels = [triton_varlen._KERNEL, triton_split._PARTIALS, triton_split._MERGE, skinny_matmul._split_k_kernel,
               triton_rotary._rotary_cache_kernel]
    called = [pair for kernel in kernels for pair in called_device_functions(kernel)]
    assert {name for name, _ in called} >= {"attend_keys", "_rotated"}
    assert [(name, function.fn.__name__) for name, function in called] == [(name, name) for name, _ in called]
