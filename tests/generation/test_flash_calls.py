"""The FlashAttention calls' plain-torch references (travel/generation/flash_calls.py) compute attention with
grouped key/value heads and its log-sum-exps; on a GPU the real calls match them."""

from __future__ import annotations

import pytest
import torch

from travel.generation.flash_calls import dense_reference, flash_dense, flash_varlen, varlen_reference


def grouped(queries=5, keys=11, heads=4, kv_heads=2, dim=8, device="cpu", dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(1, queries, heads, dim, generator=generator)
    k, v = (torch.randn(1, keys, kv_heads, dim, generator=generator) for _ in range(2))
    return [t.to(device=device, dtype=dtype) for t in (q, k, v)]


def plain(query, key, value, scale):
    """(1, queries, heads, dim) attention and (1, heads, queries) log-sum-exps, query head h on key head h // group."""
    group = query.shape[2] // key.shape[2]
    k, v = (t.double().repeat_interleave(group, dim=2) for t in (key, value))
    scores = torch.einsum("bqhd,bkhd->bhqk", query.double(), k) * scale
    return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(scores, -1), v), torch.logsumexp(scores, -1)


def test_the_dense_reference_is_grouped_attention_with_its_log_sum_exps():
    query, key, value = grouped()
    output, lse = dense_reference(query, key, value, 0.4)
    expected, expected_lse = plain(query, key, value, 0.4)
    assert output.shape == query.shape and lse.shape == (1, 4, 5)
    torch.testing.assert_close(output.double(), expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(lse.double(), expected_lse, atol=1e-6, rtol=1e-5)


def test_the_varlen_reference_attends_each_sequence_alone_and_causally_from_the_end():
    query, key, value = grouped(queries=6, keys=10)
    q_offsets, k_offsets = torch.tensor([0, 2, 6], dtype=torch.int32), torch.tensor([0, 3, 10], dtype=torch.int32)
    output, lse = varlen_reference(query[0], key[0], value[0], q_offsets, k_offsets, 4, 7, 0.4, causal=True)
    first, first_lse = plain(query[:, :2], key[:, :3], value[:, :3], 0.4)  # 2 queries over 3 keys: see 2 and 3 keys
    late_first = plain(query[:, :1], key[:, :2], value[:, :2], 0.4)
    torch.testing.assert_close(output[1].double(), first[0, 1], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(output[0].double(), late_first[0][0, 0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(lse[:, 1].double(), first_lse[0, :, 1], atol=1e-6, rtol=1e-5)
    last = plain(query[:, 2:], key[:, 3:], value[:, 3:], 0.4)[0]  # 4 queries over 7 keys: the last sees all 7
    torch.testing.assert_close(output[5].double(), last[0, 3], atol=1e-6, rtol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch's FlashAttention kernel needs CUDA")
@pytest.mark.parametrize("queries", [4, 80], ids=["one-candidate", "twenty-candidates"])
def test_the_dense_flash_call_on_cuda_matches_its_reference(queries):
    query, key, value = grouped(queries=queries, keys=6000, heads=8, kv_heads=8, dim=128, device="cuda", dtype=torch.bfloat16)
    output, lse = flash_dense(query, key, value, 128**-0.5)
    expected, expected_lse = plain(query, key, value, 128**-0.5)
    assert output.shape == query.shape and lse.shape == (1, 8, queries)
    assert (output.double() - expected).abs().max().item() < 2e-2
    assert (lse.double() - expected_lse).abs().max().item() < 1e-2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch's FlashAttention kernel needs CUDA")
def test_the_varlen_flash_call_on_cuda_matches_its_reference():
    query, key, value = grouped(queries=6, keys=10, dim=128, device="cuda", dtype=torch.bfloat16)
    offsets = [torch.tensor(o, dtype=torch.int32, device="cuda") for o in ([0, 2, 6], [0, 3, 10])]
    got = flash_varlen(query[0], key[0], value[0], *offsets, 4, 7, 0.4, True)
    expected = varlen_reference(query[0], key[0], value[0], *offsets, 4, 7, 0.4, True)
    for real, reference in zip(got, expected):
        assert (real.double() - reference.double()).abs().max().item() < 2e-2
