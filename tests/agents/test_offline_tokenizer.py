"""The offline byte-level tokenizer: exact round trips, deterministic training, ChatML special tokens."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from travel.agents.offline_tokenizer import (
    ENDOFTEXT,
    IM_END,
    IM_START,
    build_offline_tokenizer,
    train_bpe,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = build_offline_tokenizer()


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_every_string_round_trips(text):
    ids = TOKENIZER.encode(text, add_special_tokens=False)
    assert TOKENIZER.decode(ids, clean_up_tokenization_spaces=False) == text


def test_escapes_quotes_and_unicode_round_trip():
    for text in ['"\\"', "\\u00e9 \\n", "東京 Zoë \x00 \x1f", '{"day": 1, "field": "lunch", "value": "']:
        assert TOKENIZER.decode(TOKENIZER.encode(text, add_special_tokens=False)) == text


def test_special_tokens_and_vocabulary_size():
    assert TOKENIZER.eos_token == IM_END and TOKENIZER.pad_token == ENDOFTEXT
    assert TOKENIZER.convert_tokens_to_ids([ENDOFTEXT, IM_START, IM_END]) == [0, 1, 2]
    assert set(TOKENIZER.all_special_ids) == {0, 1, 2}
    assert TOKENIZER.encode("<|im_start|>user", add_special_tokens=False)[0] == 1  # one token, not text
    assert 1000 <= len(TOKENIZER) <= 2048
    assert TOKENIZER.encode("abc", add_special_tokens=True) == TOKENIZER.encode("abc", add_special_tokens=False)


def _vocabulary_digest() -> str:
    return hashlib.sha256(train_bpe().to_str().encode()).hexdigest()


def test_training_is_deterministic_within_and_across_processes():
    here = _vocabulary_digest()
    assert here == _vocabulary_digest()
    code = (
        "import hashlib; from travel.agents.offline_tokenizer import train_bpe; "
        "print(hashlib.sha256(train_bpe().to_str().encode()).hexdigest())"
    )
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(REPO_ROOT)}
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == here
