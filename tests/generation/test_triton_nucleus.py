"""Top-p's threshold by the radix-search kernel against the sort (`sampling.top_p_threshold`).

On the CPU Triton's interpreter runs the kernel (tests/conftest.py); on a GPU the compiled kernel runs, also inside
a compiled token choice."""

from __future__ import annotations

import pytest
import torch

from tests.generation.triton_interpreter import needs_interpreter
from travel.generation import triton_nucleus
from travel.generation.sampling import top_p_filter, top_p_threshold
from travel.generation.triton_nucleus import nucleus_threshold, nucleus_threshold_runs

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="the compiled kernel needs a CUDA device")


@pytest.fixture(autouse=True)
def few_programs(monkeypatch):
    """Eight programs a pass over all rows where the interpreter runs them one by one (a GPU runs 256)."""
    if not torch.cuda.is_available():
        monkeypatch.setattr(triton_nucleus, "PROGRAMS", 8)


def scores_like_a_step(rows: int, width: int, scale: float, seed: int, device: str = "cpu") -> torch.Tensor:
    """Tempered scores of bfloat16 logits (so many tie), some tokens illegal (-inf)."""
    generator = torch.Generator().manual_seed(seed)
    logits = (torch.randn(rows, width, generator=generator) * scale).bfloat16().float() / 0.7
    illegal = torch.rand(rows, width, generator=generator) < 0.1
    return logits.masked_fill(illegal, float("-inf")).to(device)


def kept_by_definition(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """(rows, width) whether the mass of the strictly higher scores is below top_p, in float64 over distinct values."""
    kept = torch.zeros_like(scores, dtype=torch.bool)
    probabilities = scores.double().softmax(dim=-1)
    for row in range(scores.shape[0]):
        values, index = torch.unique(scores[row], return_inverse=True)
        mass = torch.zeros(len(values), dtype=torch.float64).index_add_(0, index, probabilities[row])
        above = mass.flip(0).cumsum(0).flip(0) - mass
        kept[row] = (above < top_p)[index]
    return kept


@pytest.mark.parametrize("top_p", [0.1, 0.8, 0.95])
def test_the_sorts_threshold_keeps_what_the_definition_keeps(top_p):
    scores = torch.cat([scores_like_a_step(3, 3000, 3.0, 0), scores_like_a_step(3, 3000, 0.3, 1)])
    kept = scores >= top_p_threshold(scores, top_p)[:, None]
    assert torch.equal(kept, kept_by_definition(scores, top_p))


def test_tokens_tied_with_the_last_kept_one_are_all_kept():
    scores = torch.tensor([[2.0, 1.0, 1.0, 1.0, 0.0]]).log_softmax(-1)  # p = 0.37, 0.14 x 3, 0.05
    for threshold in (top_p_threshold(scores, 0.45), nucleus_threshold_or_sort(scores, 0.45)):
        assert (scores >= threshold[:, None]).tolist() == [[True, True, True, True, False]]


def nucleus_threshold_or_sort(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    return nucleus_threshold(scores, top_p) if triton_nucleus.triton is not None else top_p_threshold(scores, top_p)


@needs_interpreter
@pytest.mark.parametrize(("rows", "width", "scale", "top_p"), [(1, 2500, 0.3, 0.8), (3, 1800, 3.0, 0.5), (5, 2600, 10.0, 0.95)])
def test_the_kernels_threshold_is_the_sorts(rows, width, scale, top_p):
    """The same lowest kept score on rows of flat and peaked scores, widths that are no multiple of a block, rows
    of one chunk of several blocks and of several chunks."""
    scores = scores_like_a_step(rows, width, scale, seed=rows)
    assert torch.equal(nucleus_threshold(scores, top_p), top_p_threshold(scores, top_p))


@needs_interpreter
def test_the_kernel_keeps_all_of_a_row_without_finite_scores_and_the_one_finite_score():
    scores = torch.full((2, 300), float("-inf"))
    scores[1, 7] = -3.0
    assert nucleus_threshold(scores, 0.8).tolist() == [float("-inf"), -3.0]


def test_the_filter_uses_the_sort_where_the_kernel_does_not_run():
    scores = scores_like_a_step(2, 500, 1.0, 3)
    assert not nucleus_threshold_runs(scores)  # CPU tensors: the kernel runs on CUDA alone
    filtered = top_p_filter(scores, 0.8)
    assert torch.equal(torch.isfinite(filtered), scores >= top_p_threshold(scores, 0.8)[:, None])
    assert torch.equal(top_p_filter(scores, 1.0), scores)


def test_bad_scores_are_refused_with_their_shape():
    with pytest.raises(ValueError, match=r"\(rows, width\) float32.*\(2, 3, 4\)"):
        nucleus_threshold(torch.zeros(2, 3, 4), 0.8)


@needs_cuda
def test_cuda_the_compiled_kernel_finds_the_sorts_threshold_in_a_compiled_filter():
    scores = torch.cat([scores_like_a_step(20, 151_936, 0.5, 4), scores_like_a_step(2, 151_936, 4.0, 5)]).cuda()
    assert nucleus_threshold_runs(scores)
    assert torch.equal(nucleus_threshold(scores, 0.8), top_p_threshold(scores, 0.8))
    compiled = torch.compile(top_p_filter, fullgraph=True)
    expected = scores.masked_fill(scores < top_p_threshold(scores, 0.8)[:, None], float("-inf"))
    assert torch.equal(compiled(scores, 0.8), expected)
