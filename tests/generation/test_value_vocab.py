"""Value admissibility: the JSON-string state machine per token fragment and the per-tokenizer tables."""

from __future__ import annotations

import json

import pytest

from travel.agents.offline_tokenizer import build_offline_tokenizer
from travel.generation.value_vocab import (
    ValueVocabularyError,
    build_value_tables,
    excluded_token_ids,
    simulate_fragment,
    value_tables,
)


@pytest.mark.parametrize(
    "fragment, state, expected",
    [
        ("abc", 0, (0, False, True)),
        ("   ", 0, (0, False, False)),
        ('ab"', 0, (0, True, True)),
        ('"', 0, (0, True, False)),
        ('a"b', 0, (-1, False, False)),  # an unescaped quote must be the last character
        ('""', 1, (0, True, True)),  # escaped quote, then the closing quote
        ("\\", 0, (1, False, False)),
        ("n", 1, (0, False, False)),  # \n: a newline is no visible content
        ("/x", 1, (0, False, True)),
        ("x", 1, (-1, False, False)),  # \x is not a JSON escape
        ("u00", 1, (4, False, False)),
        ("e9 ok", 4, (0, False, True)),
        ("g", 3, (-1, False, False)),
        ("d800", 2, (-1, False, False)),  # would start a UTF-16 surrogate
        ("a\tb", 0, (-1, False, False)),  # raw control characters are invalid
        ("\ufffd", 0, (0, False, False)),  # part of a multi-byte character
        ("\u3000", 0, (0, False, False)),  # ideographic space
        ("東京", 0, (0, False, True)),
    ],
)
def test_fragment_simulation(fragment, state, expected):
    assert simulate_fragment(fragment, state) == expected


def _json_string_ok(body: str) -> bool:
    try:
        json.loads('"' + body + '"')
        return True
    except json.JSONDecodeError:
        return False


def test_simulation_agrees_with_json_on_complete_fragments():
    """A fragment read from state 0 that ends in state 0 without closing is valid JSON string content."""
    samples = ["plain", "a\\nb", "\\u00e9x", "\\\\", "\\q", "x\\u12", "tab\\t", "\\/", 'quote\\"', "\\uZZZZ"]
    for sample in samples:
        state, closes, _ = simulate_fragment(sample, 0)
        assert (state == 0 and not closes) == _json_string_ok(sample), sample


def test_tables_respect_specials_vocabulary_size_and_empty_closes():
    tokenizer = build_offline_tokenizer()
    vocab = len(tokenizer) + 100
    tables = build_value_tables(tokenizer, vocab)
    assert tables.admissible.shape == (12, vocab)
    for token_id in excluded_token_ids(tokenizer):
        assert not tables.admissible[:, token_id].any()
    assert not tables.admissible[:, len(tokenizer) :].any()
    quote = tokenizer.encode('"', add_special_tokens=False)[0]
    assert not tables.admissible[0, quote]  # state 0, no content: a bare quote cannot close
    assert tables.admissible[1, quote] and tables.closes[0, quote]
    backslash = tokenizer.encode("\\", add_special_tokens=False)[0]
    assert tables.next_state[0, backslash] == 1 and tables.next_state[1, backslash] == 0
    for token_id in range(len(tokenizer)):
        if token_id in excluded_token_ids(tokenizer):
            continue
        text = tokenizer.decode([token_id])
        if text and all(0x20 <= ord(c) and c not in '"\\' for c in text):
            assert tables.admissible[0, token_id] and tables.next_state[0, token_id] == 0


def test_tables_are_cached_per_tokenizer_and_vocabulary():
    tokenizer = build_offline_tokenizer()
    first = value_tables(tokenizer, len(tokenizer))
    assert value_tables(tokenizer, len(tokenizer)) is first
    assert value_tables(tokenizer, len(tokenizer) + 64) is not first
    assert value_tables(build_offline_tokenizer(), len(tokenizer)) is not first


class _QuoteOnlyTokenizer:
    """Every token decodes to a lone quote: nothing can continue a value."""

    all_special_ids = ()
    added_tokens_decoder = None

    def __len__(self):
        return 4

    def batch_decode(self, ids, **_):
        return ['"' + '"' for _ in ids]


def test_a_vocabulary_that_cannot_write_values_is_rejected():
    with pytest.raises(ValueVocabularyError, match="no token"):
        build_value_tables(_QuoteOnlyTokenizer(), 4)
