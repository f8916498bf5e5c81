"""The reward's penalty rates for one action text (docs/reward.md "Penalties"): copying the reference and length.

- reference copy: the share of the text's word 8-grams that occur in the row's reference information,
  mapped to [0, 1] between a 0.20 floor and 0.80;
- overlong: how far the text runs past 240 + 180 characters per owned slot, relative to that limit.
"""

from __future__ import annotations

import re
from functools import lru_cache

WORD_TOKEN = re.compile(r"[a-z0-9]+(?:[.$:+/\-][a-z0-9]+)*")
COPY_NGRAM = 8
_KNOWN_RUN = re.compile("1{%d,}" % COPY_NGRAM)
COPY_FLOOR, COPY_SPAN = 0.20, 0.60
OVERLONG_BASE, OVERLONG_PER_SLOT = 240, 180


@lru_cache(maxsize=512)
def reference_ngram_index(reference_text: str) -> tuple[frozenset[str], frozenset[tuple[str, ...]]]:
    """The reference's word vocabulary and 8-gram set (computed once per reference string)."""
    tokens = WORD_TOKEN.findall(reference_text.lower())
    grams = frozenset(tuple(tokens[i : i + COPY_NGRAM]) for i in range(len(tokens) - COPY_NGRAM + 1))
    return frozenset(tokens), grams


def reference_copy_fraction(text: str, index: tuple[frozenset[str], frozenset[tuple[str, ...]]]) -> float | None:
    """Fraction of the text's 8-grams that occur in the reference; None when the text has under 8 tokens."""
    tokens = WORD_TOKEN.findall(text.lower())
    total = len(tokens) - COPY_NGRAM + 1
    if total <= 0:
        return None
    vocabulary, grams = index
    # A window holding a word the reference never uses cannot be a copied 8-gram, so only runs of at
    # least 8 reference words are looked up (action JSON keys break almost every window).
    known = "".join(["1" if token in vocabulary else "0" for token in tokens])
    present = 0
    for run in _KNOWN_RUN.finditer(known):
        for start in range(run.start(), run.end() - COPY_NGRAM + 1):
            if tuple(tokens[start : start + COPY_NGRAM]) in grams:
                present += 1
    return present / total


def reference_copy_rate(text: str, index: tuple[frozenset[str], frozenset[tuple[str, ...]]]) -> float:
    """clamp01((copied 8-gram fraction - 0.20) / 0.60); 0 for texts under 8 tokens."""
    fraction = reference_copy_fraction(text, index)
    if fraction is None:
        return 0.0
    return min(1.0, max(0.0, (fraction - COPY_FLOOR) / COPY_SPAN))


def overlong_rate(text: str, owned_count: int) -> float:
    """clamp01((len(text) - L) / L) with L = 240 + 180 * owned slots."""
    limit = OVERLONG_BASE + OVERLONG_PER_SLOT * owned_count
    return min(1.0, max(0.0, (len(text) - limit) / limit))
