"""Adversarial action-text families, each a function of the text length: backtick runs, fence markers,
bracket runs in front of a long list, long literals, lone surrogates, NUL runs and their neighbours. Shared by
tests/reward/test_adversarial_text.py and bench/reward_adversarial.py."""

from __future__ import annotations

from typing import Callable


def _repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _sized(build: Callable[[int], str]) -> Callable[[int], str]:
    """Exactly `n` characters of the family's text (so a size at the cap is parsed, one above it is not)."""
    return lambda n: build(n)[:n]


_BUILDERS: dict[str, Callable[[int], str]] = {
    "backtick_run": lambda n: "`" * n,
    "fence_tag_letters": lambda n: _repeat("```json" + "a" * 100, n),
    "fence_blocks": lambda n: _repeat("```json\n{\"a\": [1, 2]}\n", n),
    "open_fence": lambda n: "```json\n" + _repeat('{"agent_id": 0, "assignments": [', n),
    "bracket_run_then_list": lambda n: "[" * 512 + "[" + _repeat("1,", n) + "1]",
    "brace_run": lambda n: "{" * n,
    "python_literal": lambda n: "[" + _repeat("'abc', ", n) + "]",
    "json_items": lambda n: '{"agent_id": 0, "assignments": [' + _repeat('{"day": 1, "field": "breakfast", "value": "x"}, ', n) + "]}",
    "lone_surrogates": lambda n: "\ud800" * n,
    "nul_run": lambda n: "\x00" * n,
    "quote_run": lambda n: '"' * n,
    "backslash_run": lambda n: "\\" * n,
}
FAMILIES: dict[str, Callable[[int], str]] = {name: _sized(build) for name, build in _BUILDERS.items()}
