"""Which tokens may appear inside a JSON string value, and what each one does to the string state.

A value is written between the forced `"value": "` and its closing quote. The escape state of the
string is one of six (ESCAPE_STATES): 0 normal, 1 right after a backslash, 2..5 inside `\\uXXXX`
with 4..1 hex digits still to come. Decoding a token alone gives a fragment; simulating the
fragment from each start state yields, per (state, token):

    next_state    the escape state after the fragment (-1: the fragment cannot continue the string)
    closes        the fragment ends with the unescaped `"` that closes the value
    adds_content  the fragment adds a visible character to the value: not whitespace, not a control
                character, not U+FFFD (what part of a multi-byte character decodes to alone)

From these, `admissible[state, has_content]` says which tokens the policy may sample: special and
added tokens, empty fragments and ids at or above len(tokenizer) never; an unescaped `"` only as
the last character of a fragment; and a closing fragment only if the value already has visible
content or the fragment adds some (so no value can close blank, which the parser would reject).

Two deliberate restrictions keep every value a valid, printable Python string: a `\\uXXXX` escape
counts as no visible content (its code point is unknown until the last digit, possibly a space),
and its first hex digit may not be `d`/`D` (no UTF-16 surrogate halves, which are not encodable).

The tables are built once per (tokenizer, model vocabulary size), guarded by a lock, and copied to
each device once.
"""

from __future__ import annotations

import re
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch

NORMAL, AFTER_BACKSLASH = 0, 1
ESCAPE_STATES = 6  # 0 normal, 1 after backslash, 2..5 = 4..1 hex digits of \uXXXX remaining
SIMPLE_ESCAPES_VISIBLE = frozenset('"\\/')  # \" \\ \/ add a visible character
SIMPLE_ESCAPES_INVISIBLE = frozenset("bfnrt")  # backspace, form feed, newline, return, tab
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
SURROGATE_LEAD = frozenset("dD")
# What a token holding part of a multi-byte character decodes to alone; it is not visible content,
# because the completed character may be a space (e.g. U+3000 split over byte tokens).
REPLACEMENT_CHARACTER = "\ufffd"
_SPECIAL = re.compile(r'["\\\x00-\x1f]')


class ValueVocabularyError(ValueError):
    """The tokenizer cannot express JSON string values (no admissible or no closing token)."""


def simulate_fragment(fragment: str, state: int) -> tuple[int, bool, bool]:
    """(next_state, closes, adds_content) of `fragment` read from escape `state`; next_state -1 if invalid."""
    content = False
    position, length = 0, len(fragment)
    while position < length:
        if state == NORMAL:
            match = _SPECIAL.search(fragment, position)
            end = match.start() if match else length
            if fragment[position:end].replace(REPLACEMENT_CHARACTER, "").strip():
                content = True
            if match is None:
                break
            char = fragment[end]
            position = end + 1
            if char == '"':
                return (NORMAL, True, content) if position == length else (-1, False, False)
            if char == "\\":
                state = AFTER_BACKSLASH
                continue
            return -1, False, False  # a raw control character
        char = fragment[position]
        position += 1
        if state == AFTER_BACKSLASH:
            if char in SIMPLE_ESCAPES_VISIBLE:
                content, state = True, NORMAL
            elif char in SIMPLE_ESCAPES_INVISIBLE:
                state = NORMAL
            elif char == "u":
                state = 2
            else:
                return -1, False, False
        else:
            if char not in HEX_DIGITS or (state == 2 and char in SURROGATE_LEAD):
                return -1, False, False
            state = NORMAL if state == 5 else state + 1
    return state, False, content


@dataclass
class ValueTables:
    """Per-token tables over the model vocabulary (CPU master copy; `on(device)` caches device copies)."""

    next_state: torch.Tensor  # (ESCAPE_STATES, V) long, -1 = inadmissible
    closes: torch.Tensor  # (ESCAPE_STATES, V) bool
    adds_content: torch.Tensor  # (ESCAPE_STATES, V) bool
    admissible: torch.Tensor  # (ESCAPE_STATES * 2, V) bool, row = state * 2 + has_content
    vocab_size: int
    _device_copies: dict[str, ValueTables] = field(default_factory=dict, repr=False)

    def on(self, device: torch.device | str) -> ValueTables:
        key = str(torch.device(device))
        if key == "cpu":
            return self
        if key not in self._device_copies:
            self._device_copies[key] = ValueTables(
                next_state=self.next_state.to(device),
                closes=self.closes.to(device),
                adds_content=self.adds_content.to(device),
                admissible=self.admissible.to(device),
                vocab_size=self.vocab_size,
            )
        return self._device_copies[key]


def excluded_token_ids(tokenizer: Any) -> set[int]:
    """Special tokens and every added token (chat control tokens), never admissible in a value."""
    ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    ids.update(int(i) for i in (getattr(tokenizer, "added_tokens_decoder", None) or {}))
    return ids


def token_fragments(tokenizer: Any) -> list[str]:
    """The text of each token id below len(tokenizer), decoded alone."""
    count = len(tokenizer)
    return tokenizer.batch_decode(
        [[token_id] for token_id in range(count)], skip_special_tokens=False, clean_up_tokenization_spaces=False
    )


def build_value_tables(tokenizer: Any, vocab_size: int) -> ValueTables:
    """Simulate every token from every escape state (uncached; see `value_tables`)."""
    count = min(len(tokenizer), vocab_size)
    fragments = token_fragments(tokenizer)[:count]
    excluded = excluded_token_ids(tokenizer)
    next_state = torch.full((ESCAPE_STATES, vocab_size), -1, dtype=torch.long)
    closes = torch.zeros((ESCAPE_STATES, vocab_size), dtype=torch.bool)
    adds = torch.zeros((ESCAPE_STATES, vocab_size), dtype=torch.bool)
    memo: dict[tuple[str, int], tuple[int, bool, bool]] = {}
    for token_id, fragment in enumerate(fragments):
        if token_id in excluded or not fragment:
            continue
        for state in range(ESCAPE_STATES):
            key = (fragment, state)
            if key not in memo:
                memo[key] = simulate_fragment(fragment, state)
            out, close, content = memo[key]
            if out >= 0:
                next_state[state, token_id], closes[state, token_id], adds[state, token_id] = out, close, content
    valid = next_state >= 0
    admissible = torch.zeros((ESCAPE_STATES * 2, vocab_size), dtype=torch.bool)
    for state in range(ESCAPE_STATES):
        admissible[state * 2] = valid[state] & (~closes[state] | adds[state])
        admissible[state * 2 + 1] = valid[state]
    for state in range(ESCAPE_STATES):
        for has_content in (0, 1):
            if not admissible[state * 2 + has_content].any():
                raise ValueVocabularyError(
                    f"no token of the tokenizer can continue a JSON string from escape state {state} "
                    f"(has_content={has_content})"
                )
    if not (admissible[NORMAL * 2 + 1] & closes[NORMAL]).any():
        raise ValueVocabularyError('no token of the tokenizer can close a JSON string value (a `"` token)')
    return ValueTables(next_state, closes, adds, admissible, vocab_size)


_LOCK = threading.Lock()
_CACHE: weakref.WeakKeyDictionary[Any, dict[int, ValueTables]] = weakref.WeakKeyDictionary()
_CACHE_BY_ID: dict[int, tuple[Any, dict[int, ValueTables]]] = {}


def value_tables(tokenizer: Any, vocab_size: int) -> ValueTables:
    """The cached tables of `tokenizer` for a model with `vocab_size` logits."""
    with _LOCK:
        try:
            per_tokenizer = _CACHE.setdefault(tokenizer, {})
        except TypeError:  # not weak-referenceable: keep it alive with its tables
            per_tokenizer = _CACHE_BY_ID.setdefault(id(tokenizer), (tokenizer, {}))[1]
        if vocab_size not in per_tokenizer:
            per_tokenizer[vocab_size] = build_value_tables(tokenizer, vocab_size)
        return per_tokenizer[vocab_size]
