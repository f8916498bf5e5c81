"""A byte-level BPE tokenizer with a ChatML template that is built in-process, with no download.

It serves the random-weight models (`tiny_random`, `random_qwen3_4b`): the BPE merges are trained
deterministically on a fixed built-in text of action JSON, travel vocabulary and prompt words, so
every process builds the same vocabulary. Because it is byte-level, every string (quotes,
backslashes, control characters, any Unicode) encodes and decodes back exactly.

The special tokens and chat template follow Qwen's instruct models: `<|im_start|>` / `<|im_end|>`
frame the turns, `<|im_end|>` is the end of an assistant turn (eos) and `<|endoftext|>` pads.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from travel.task.fields import ROLE_FIELDS
from travel.task.roles import format_action

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END)
TARGET_VOCAB_SIZE = 1536

CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

_CITIES = (
    "Sarasota",
    "Chicago",
    "Rockford",
    "Myrtle Beach",
    "St. Petersburg",
    "San Francisco",
    "Los Angeles",
    "New York",
    "Houston",
    "Dallas",
    "Seattle",
    "Denver",
    "Atlanta",
    "Phoenix",
    "Charlotte",
    "Las Vegas",
    "Alpha",
    "Beta",
    "Gamma",
    "Ithaca",
    "Punta Gorda",
    "Wilmington",
    "Yakima",
    "Bismarck",
    "Santa Maria",
)
_RESTAURANTS = (
    "Coco Bambu",
    "Cafe",
    "Diner",
    "Bistro",
    "Brunch",
    "Burger King",
    "Pizza Hut",
    "Dominos",
    "The Grill House",
    "Saffron",
    "Kebab Corner",
    "Thai Spice",
    "Blue Moon Cafe",
    "Green Garden",
    "Sushi Bar",
    "Taco Bell",
)
_ATTRACTIONS = (
    "Museum",
    "Park",
    "Art Institute",
    "Navy Pier",
    "Botanic Garden",
    "Science Center",
    "Aquarium",
    "Zoo",
    "Millennium Park",
    "Space Needle",
    "Golden Gate Bridge",
    "Historic District",
    "Waterfront Trail",
)
_HOTELS = (
    "Hotel",
    "Motel",
    "Cozy Room in Downtown",
    "Private room near the park",
    "Entire home with garden",
    "Sunny apartment",
    "Shared room in a loft",
    "Spacious studio",
    "Quiet bedroom",
)
_WORDS = (
    "LOGISTICS AND FEASIBILITY",
    "DAILY EXPERIENCE",
    "REQUIRED",
    "EMPTY",
    "exact",
    "distinct",
    "budget",
    "people",
    "days",
    "day",
    "date",
    "query",
    "origin",
    "destination",
    "visiting city number",
    "level",
    "easy",
    "medium",
    "hard",
    "house rule",
    "cuisine",
    "room type",
    "transportation",
    "No parties",
    "No smoking",
    "No pets",
    "No visitors",
    "No children under 10",
    "Entire home/apt",
    "Private room",
    "Shared room",
    "not shared room",
    "No flight",
    "No self-driving",
    "Indian",
    "Chinese",
    "Italian",
    "American",
    "Mexican",
    "French",
    "Mediterranean",
    "Japanese",
    "cost",
    "price",
    "minimum nights",
    "maximum occupancy",
    "eligible",
    "yes",
    "no",
    "none",
    "total",
    "floor",
    "cap",
    "slack",
    "reference",
    "catalog",
    "scaffold",
    "stay",
    "travel",
    "return",
    "assignment",
    "assignments",
    "value",
    "field",
    "agent",
    "the",
    "and",
    "of",
    "to",
    "in",
    "for",
    "with",
    "from",
    "a",
    "is",
    "on",
    "every",
    "one",
    "Please",
    "plan",
    "trip",
    "starting",
    "heading",
    "spanning",
    "budget of",
    "Return only the JSON object",
)


def training_text() -> str:
    """The fixed text the merges are learned from (a few KB; no randomness, no hashing)."""

    lines: list[str] = []
    for position, city in enumerate(_CITIES):
        other = _CITIES[(position * 7 + 3) % len(_CITIES)]
        restaurant = _RESTAURANTS[position % len(_RESTAURANTS)]
        attraction = _ATTRACTIONS[position % len(_ATTRACTIONS)]
        hotel = _HOTELS[position % len(_HOTELS)]
        flight = f"Flight Number: F{3573659 + 7919 * position}, from {city} to {other}, Departure Time: 0{position % 10}:2{position % 6}"
        logistics = [
            (1, ROLE_FIELDS[0][0], f"from {city} to {other}"),
            (1, ROLE_FIELDS[0][1], flight),
            (1, ROLE_FIELDS[0][2], f"{hotel}, {other}"),
            (2, ROLE_FIELDS[0][0], other),
            (2, ROLE_FIELDS[0][1], "-"),
            (2, ROLE_FIELDS[0][2], "-"),
        ]
        experience = [(1 + day, field, f"{restaurant}, {other}") for day in range(2) for field in ROLE_FIELDS[1]]
        experience[1] = (1, "attraction", f"{attraction}, {other};")
        lines.append(format_action(0, logistics))
        lines.append(format_action(1, experience))
        lines.append(
            f"Self-driving, from {city} to {other}, duration: {position + 1} hours {position * 3} mins, "
            f"distance: {120 + 37 * position} km, cost: {15 + position}"
        )
        lines.append(f"{restaurant} | {20 + position} | Indian, Chinese | {city} | rating 4.{position % 10}")
    lines.append(" ".join(_WORDS))
    lines.append(" ".join(word.lower() for word in _WORDS))
    lines.append("0123456789 " * 8 + '$1,250.00 2022-03-16 14:05 \\n \\" \\u00e9 \\t -')
    return "\n".join(lines)


def train_bpe(vocab_size: int = TARGET_VOCAB_SIZE) -> Tokenizer:
    """Train the byte-level BPE on `training_text()`; the result depends only on this module's text."""
    tokenizer = Tokenizer(models.BPE())
    # No regex pre-split: merges may span spaces and punctuation, so the forced JSON schema between
    # values takes a few tokens (short decodes for tests) while every string still round-trips.
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(training_text().split("\n"), trainer=trainer)
    return tokenizer


def wrap_tokenizer(tokenizer: Tokenizer) -> PreTrainedTokenizerBase:
    """A transformers fast tokenizer around `tokenizer` with the special tokens and ChatML template."""
    from transformers import PreTrainedTokenizerFast

    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=None,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        additional_special_tokens=[IM_START],
        clean_up_tokenization_spaces=False,
        model_max_length=1 << 20,
    )
    wrapped.chat_template = CHATML_TEMPLATE
    wrapped.padding_side = "left"
    return wrapped


@functools.lru_cache(maxsize=1)
def _cached_bpe() -> Tokenizer:
    return train_bpe()


def build_offline_tokenizer() -> PreTrainedTokenizerBase:
    """The offline tokenizer; the BPE is trained once per process, each call returns a fresh wrapper."""
    return wrap_tokenizer(Tokenizer.from_str(_cached_bpe().to_str()))
