"""Token choice: mask before temperature before top-p; greedy ties; seeded streams."""

from __future__ import annotations

import pytest
import torch

from travel.generation.sampling import (
    blocked_argmax,
    blocked_cumsum,
    ensure_legal,
    greedy_choice,
    sample_choice,
    seeded_uniforms,
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
