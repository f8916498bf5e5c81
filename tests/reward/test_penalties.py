"""The reward's penalty rates: reference 8-gram copying and overlong action texts."""

from __future__ import annotations

import pytest

from tests.fixtures import fixture_row
from travel.reward.penalties import (
    WORD_TOKEN,
    overlong_rate,
    reference_copy_fraction,
    reference_copy_rate,
    reference_ngram_index,
)


@pytest.fixture(scope="module")
def row():
    return fixture_row()


def test_word_tokens_join_on_the_listed_separators_only():
    assert WORD_TOKEN.findall("flight f123 at 15:40, cost $ 20/night a-b a_b 1.5.") == [
        "flight", "f123", "at", "15:40", "cost", "20/night", "a-b", "a", "b", "1.5",
    ]  # fmt: skip


def test_copy_rate_counts_reference_eight_grams():
    index = reference_ngram_index("a b c d e f g h i j")
    # 10 tokens -> 3 eight-grams, only the first (a..h) is in the reference: 1/3 present.
    assert reference_copy_fraction("a b c d e f g h x y", index) == pytest.approx(1 / 3)
    assert reference_copy_rate("a b c d e f g h x y", index) == pytest.approx((1 / 3 - 0.2) / 0.6)
    assert reference_copy_rate("A B C D E F G H I J", index) == 1.0
    assert reference_copy_rate("a b c d e f g", index) == 0.0  # under 8 tokens
    # 6 grams, 1 present: 1/6 < 0.20 gives no penalty.
    assert reference_copy_rate("a b c d e f g h z z z z z", index) == 0.0


def test_copy_fraction_checks_every_window_between_unknown_words():
    index = reference_ngram_index("a b c d e f g h i j k")
    # windows: (a..h) yes, (b..i) yes, (c..j) yes, then q breaks, (c..j) again after it.
    assert reference_copy_fraction("a b c d e f g h i j q c d e f g h i j", index) == pytest.approx(4 / 12)


def test_reference_ngram_index_is_cached_per_reference_text(row):
    assert reference_ngram_index(row.reference_information) is reference_ngram_index(row.reference_information)


def test_overlong_rate_is_linear_above_the_role_limit():
    limit = 240 + 180 * 9
    assert overlong_rate("x" * limit, 9) == 0.0
    assert overlong_rate("x" * (limit + limit // 2), 9) == pytest.approx((limit // 2) / limit)
    assert overlong_rate("x" * (3 * limit), 9) == 1.0
