"""The decoder's grammar rules driven by scripted models (docs/task.md "Structured decoding"): forced schema after a close,
the value cap, escapes and their forced completion, greedy tie-breaking."""

from __future__ import annotations

import json

import pytest
import torch

from tests.generation.conftest import assert_strict_action, short_request
from tests.generation.scripted import ConstantLM, ScriptedLM
from travel.generation import StructuredDecoder
from travel.generation.value_vocab import excluded_token_ids
from travel.task.fields import owned_slots
from travel.task.roles import format_action


@pytest.fixture(scope="module")
def tokenizer(tiny):
    return tiny.tokenizer


def scripted_decode(tokenizer, values, agent_id=0, days=1, max_value_tokens=32, max_new_tokens=400, after_close=None):
    model = ScriptedLM(tokenizer, values, vocab_size=len(tokenizer) + 37, prefer_after_close=after_close)
    decoder = StructuredDecoder(model, tokenizer, max_new_tokens=max_new_tokens, max_value_tokens=max_value_tokens)
    (group,) = decoder.generate([short_request(tokenizer, agent_id, days)], 1, greedy=True)
    return group[0]


def test_after_a_closed_value_only_the_schema_is_legal(tokenizer):
    """The model wants `]` right after every value; the forced suffix wins, and the action is exact."""
    candidate = scripted_decode(tokenizer, ["A", "-", "B"], after_close="]")
    slots = owned_slots(0, 1)
    assert candidate.text == format_action(0, [(d, f, v) for (d, f), v in zip(slots, ["A", "-", "B"])])
    # Mask: 'A' + '"', '-' + '"', 'B' + '"' (single-character tokens, voluntary closes included).
    assert int(candidate.value_mask.sum()) == 6
    bracket = tokenizer.encode("]", add_special_tokens=False)[0]
    assert bracket not in candidate.token_ids[candidate.value_mask].tolist()


def test_value_token_cap_forces_a_close(tokenizer):
    candidate = scripted_decode(tokenizer, ["ABCDEFGH", "xy", "Z"], max_value_tokens=3)
    values = assert_strict_action(candidate.text, 0, 1)
    assert values == ["ABC", "xy", "Z"]
    # 3 capped tokens (the close is forced), then 'x','y','"' and 'Z','"'.
    assert int(candidate.value_mask.sum()) == 3 + 3 + 2


@pytest.mark.parametrize(
    "raw, decoded",
    [
        ('Yakima \\"Cruise-the-Ave\\"', 'Yakima "Cruise-the-Ave"'),
        ("line\\nbreak", "line\nbreak"),
        ("tab\\there", "tab\there"),
        ("back\\\\slash", "back\\slash"),
        ("caf\\u00e9", "caf\u00e9"),
        ("slash\\/", "slash/"),
        ("ctrl\\u001f", "ctrl\x1f"),
    ],
)
def test_escaped_values_round_trip(tokenizer, raw, decoded):
    candidate = scripted_decode(tokenizer, [raw, "-", "x"])
    values = assert_strict_action(candidate.text, 0, 1)
    assert values[0] == decoded
    assert candidate.text.count(raw) == 1  # written exactly as scripted, nothing forced into the value


@pytest.mark.parametrize(
    "raw, cap, decoded",
    [
        ("ab\\nc", 3, "ab\n"),  # cut after the backslash: close `n"`
        ("ab\\u00e9", 4, "ab\u0000"),  # cut after `\u`: close `0000"`
        ("ab\\u1abc", 5, "ab\u1000"),  # `\u1` + `000"`
        ("ab\\u12bc", 6, "ab\u1200"),  # `\u12` + `00"`
        ("ab\\u123c", 7, "ab\u1230"),  # `\u123` + `0"`
        ("\\u12bc", 4, "\u1200-"),  # no visible content yet: the close also adds `-`
        ("\\nxyz", 1, "\n-"),
        ("  xyz", 2, "  -"),  # only spaces so far: `-"` like an empty value
    ],
)
def test_forced_close_completes_a_partial_escape(tokenizer, raw, cap, decoded):
    candidate = scripted_decode(tokenizer, [raw, "-", "x"], max_value_tokens=cap)
    values = assert_strict_action(candidate.text, 0, 1)
    assert values[0] == decoded
    assert int(candidate.value_mask[: cap + 1].sum()) == cap


def test_surrogate_escapes_are_never_started(tokenizer):
    """`\\uD800` would be half of a UTF-16 pair; the grammar refuses `d` as the first hex digit."""
    candidate = scripted_decode(tokenizer, ["\\ud83d\\ude00", "-", "x"])
    values = assert_strict_action(candidate.text, 0, 1)
    assert "\\ud" not in candidate.text.lower()
    values[0].encode("utf-8")  # a valid string, no lone surrogate


def test_unicode_and_long_actions_for_both_roles(tokenizer):
    values = ["Café Zoë – 東京", "New York", "x" * 40, "\u3000 wide space"] + ["-"] * 8
    candidate = scripted_decode(tokenizer, values, agent_id=1, days=3, max_value_tokens=64, max_new_tokens=1024)
    parsed = assert_strict_action(candidate.text, 1, 3)
    # Non-ASCII characters are written one byte token at a time and decode whole inside the full text.
    assert parsed[:4] == values[:4]
    assert int(candidate.value_mask.sum()) == sum(len(v.encode("utf-8")) + 1 for v in values)


def test_greedy_breaks_ties_by_lowest_token_id(tokenizer):
    """Equal logits everywhere: every value token is the lowest admissible id, computed here directly."""
    vocab = len(tokenizer) + 37
    decoder = StructuredDecoder(ConstantLM(vocab), tokenizer, max_new_tokens=120, max_value_tokens=2)
    (group,) = decoder.generate([short_request(tokenizer, 0, 1)], 2, greedy=True)
    excluded = excluded_token_ids(tokenizer)
    lowest = next(
        i
        for i in range(len(tokenizer))
        if i not in excluded
        and (text := tokenizer.decode([i]))
        and not any(c in text for c in '"\\')
        and all(ord(c) >= 0x20 for c in text)
    )
    for candidate in group:
        sampled = candidate.token_ids[candidate.value_mask].tolist()
        assert sampled == [lowest] * 6  # 3 values, 2 tokens each (cap), closes forced
        assert_strict_action(candidate.text, 0, 1)


def test_decoded_text_equals_the_json_values(tokenizer):
    candidate = scripted_decode(tokenizer, ["from Alpha to Beta", "Flight Number: F100", "Hotel, Beta"])
    data = json.loads(candidate.text)
    assert [item["value"] for item in data["assignments"]] == [
        "from Alpha to Beta",
        "Flight Number: F100",
        "Hotel, Beta",
    ]
    assert torch.all(
        candidate.value_mask.sum()
        == sum(len(v) + 1 for v in ["from Alpha to Beta", "Flight Number: F100", "Hotel, Beta"])
    )
