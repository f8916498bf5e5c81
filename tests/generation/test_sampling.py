"""Token choice: mask before temperature before top-p; greedy ties; seeded streams."""

from __future__ import annotations

import pytest
import torch

from travel.generation.sampling import (
    blocked_argmax,
    blocked_cumsum,
    ensure_legal,
    greedy_choice,
    half_keys,
    key_order_counts,
    nucleus_bins,
    nucleus_scores,
    sample_choice,
    seeded_uniforms,
    spread_counters,
    token_keys,
    top_p_filter,
)


def test_top_p_keeps_the_smallest_set_reaching_p():
    probabilities = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    kept = torch.isfinite(top_p_filter(probabilities.log(), 0.8))
    assert kept.tolist() == [[True, True, False, False]]
    kept = torch.isfinite(top_p_filter(probabilities.log(), 0.81))
    assert kept.tolist() == [[True, True, True, False]]
    kept = torch.isfinite(top_p_filter(probabilities.log(), 0.1))
    assert kept.tolist() == [[True, False, False, False]]  # the most likely token always stays


def test_the_nucleus_keeps_or_drops_equal_scores_together():
    scores = torch.tensor([[0.4, 0.2, 0.2, 0.2, 0.1]]).log()
    bins = nucleus_bins(scores.to(torch.bfloat16).float())
    legal = torch.ones_like(scores, dtype=torch.bool)
    for logits, counted in ((scores, None), (scores.to(torch.bfloat16).float(), bins)):
        # the three 0.2s have 0.4 above them: all kept at 0.5, where a sort's cumulative sum stops after one
        kept = torch.isfinite(nucleus_scores(logits, legal, 1.0, 0.5, counted))
        assert kept.tolist() == [[True, True, True, True, False]], counted
        kept = torch.isfinite(nucleus_scores(logits, legal, 1.0, 0.3, counted))
        assert kept.tolist() == [[True, False, False, False, False]], counted


def test_half_keys_order_every_16_bit_value_and_the_bins_hold_them():
    patterns = torch.arange(1 << 16, dtype=torch.int32)
    for dtype in (torch.bfloat16, torch.float16):
        values = torch.where(patterns >= 0x8000, patterns - 0x10000, patterns).to(torch.int16).view(dtype).float()
        values = values[~values.isnan()]
        keys = half_keys(values, dtype)
        assert keys.unique().numel() == values.numel() - 1  # every value its own key but -0 and +0
        order = values.argsort(stable=True)
        assert (keys[order].diff() >= 0).all(), dtype
        bins = nucleus_bins(values[None])
        assert bins is not None and bins.dtype == dtype and torch.equal(bins.float()[keys], values)


def test_spread_counters_give_neighbouring_keys_distant_counters_and_read_back_in_key_order():
    keys = torch.arange(1 << 16)
    counters = spread_counters(keys)
    assert torch.equal(counters.sort().values, keys)  # one counter per key
    assert (counters[1:32] - counters[:31] == 2048).all()  # 32 neighbours on 32 cache lines
    weights = torch.randint(0, 1000, (3, 1 << 16))
    spread = torch.zeros_like(weights).scatter_add(1, counters.expand(3, -1), weights)
    assert torch.equal(key_order_counts(spread), weights)


def test_the_nucleus_by_counts_is_the_sorted_nucleus():
    """Where the logits are 16-bit floats the decode loop counts them (`nucleus_bins`); the kept tokens and their
    scores are the sort's, for both dtypes, masks, temperatures and top-p values."""
    generator = torch.Generator().manual_seed(3)
    assert nucleus_bins(torch.randn(2, 50, generator=generator)) is None  # float32 logits sort
    for dtype, spread in ((torch.bfloat16, 1.0), (torch.bfloat16, 4.0), (torch.float16, 2.0)):
        logits = (torch.randn(5, 151_936, generator=generator) * spread).to(dtype).float()
        legal = torch.rand(5, 151_936, generator=generator) < 0.97
        legal[1] = torch.rand(151_936, generator=generator) < 0.001  # a row of few legal tokens
        legal[2] = False
        legal[2, 77] = True  # one legal token
        bins = nucleus_bins(logits)
        assert bins is not None and bins.dtype == dtype
        for temperature, top_p in ((1.0, 0.8), (0.7, 0.95), (1.3, 0.2), (1.0, 1.0)):
            sorted_nucleus = nucleus_scores(logits, legal, temperature, top_p)
            assert torch.equal(nucleus_scores(logits, legal, temperature, top_p, bins), sorted_nucleus), (dtype, top_p)
            kept = torch.isfinite(sorted_nucleus)
            assert kept[2].nonzero().tolist() == [[77]] and (kept <= legal).all()
            assert top_p == 1.0 or kept.sum() < legal.sum()


def test_mask_applies_before_top_p():
    """The illegal favourite does not use up the nucleus: sampling is over the renormalised legal tokens."""
    logits = torch.tensor([[10.0, 1.0, 0.0]])
    legal = torch.tensor([[False, True, True]])
    draws = [int(sample_choice(logits, legal, 0.7, 0.8, torch.Generator().manual_seed(s))) for s in range(50)]
    assert set(draws) == {1}  # legal probabilities ~0.81 / 0.19 at T=0.7: the nucleus is token 1 alone


def test_temperature_sharpens_sampling():
    logits = torch.tensor([[1.0, 0.0]]).repeat(4000, 1)
    legal = torch.ones_like(logits, dtype=torch.bool)
    cold = sample_choice(logits, legal, 0.5, 1.0, uniforms=seeded_uniforms(torch.arange(4000), 0, 2))
    hot = sample_choice(logits, legal, 2.0, 1.0, uniforms=seeded_uniforms(torch.arange(4000), 0, 2))
    expected_cold = torch.tensor([2.0, 0.0]).softmax(-1)[0]
    expected_hot = torch.tensor([0.5, 0.0]).softmax(-1)[0]
    assert abs((cold == 0).float().mean() - expected_cold) < 0.03
    assert abs((hot == 0).float().mean() - expected_hot) < 0.03


def test_greedy_takes_the_lowest_id_among_equal_legal_maxima():
    logits = torch.tensor([[3.0, 5.0, 5.0, 5.0, 9.0]])
    legal = torch.tensor([[True, False, True, True, False]])
    assert greedy_choice(logits, legal).tolist() == [2]


def test_seeded_uniforms_depend_only_on_the_row_seed():
    alone = seeded_uniforms(torch.tensor([42]), 7, 50)
    in_batch = seeded_uniforms(torch.tensor([1, 42, 3]), 7, 50)
    assert torch.equal(alone[0], in_batch[1])
    assert not torch.equal(in_batch[0], in_batch[1])
    assert not torch.equal(seeded_uniforms(torch.tensor([42]), 8, 50), alone)
    assert float(alone.min()) > 0 and float(alone.max()) < 1


def test_an_illegal_choice_falls_back_to_the_lowest_legal_id():
    legal = torch.tensor([[False, False, True, True], [True, True, False, False]])
    assert ensure_legal(torch.tensor([0, 1]), legal).tolist() == [2, 1]


@pytest.mark.parametrize("width", [1, 5, 128, 129, 1000, 151_936])
def test_the_blocked_cumsum_is_the_cumulative_sum(width):
    x = torch.rand(3, width, dtype=torch.float64, generator=torch.Generator().manual_seed(width))
    assert torch.allclose(blocked_cumsum(x), x.cumsum(dim=-1), rtol=1e-12, atol=1e-12)
    assert torch.allclose(blocked_cumsum(x, block=7), x.cumsum(dim=-1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("width", [1, 5, 256, 257, 1000, 151_936])
def test_the_blocked_argmax_is_the_first_maximum(width):
    generator = torch.Generator().manual_seed(width)
    spread = torch.randn(4, width, generator=generator)
    ties = torch.randint(0, 3, (4, width), generator=generator).float()  # many equal maxima, some across blocks
    masked = spread.masked_fill(torch.rand(4, width, generator=generator) < 0.9, float("-inf"))
    masked[0] = float("-inf")  # a row with no finite score
    with_nan = spread.clone()
    with_nan[1, width // 2] = float("nan")
    legal = torch.rand(4, width, generator=generator) < 0.01
    legal[2] = False
    for x in (spread, ties, masked, with_nan, legal.to(torch.uint8)):
        for block in (256, 7):
            assert torch.equal(blocked_argmax(x, block), torch.argmax(x, dim=-1)), (x.dtype, block)


def test_seeded_uniforms_with_held_token_keys_equal_those_computed_in_the_call():
    seeds, steps = torch.tensor([3, 8]), torch.tensor([0, 41])
    assert torch.equal(seeded_uniforms(seeds, steps, 300, token_keys(300)), seeded_uniforms(seeds, steps, 300))
