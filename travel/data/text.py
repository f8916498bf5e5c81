"""Text normalisation shared by the catalog, the scaffold, the merger and the evaluator."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

_SPACES = re.compile(r"\s+")


def canonical(value: Any) -> str:
    """Collapse whitespace runs, strip, casefold; empty (or None) becomes "-"."""
    if value is None:
        return "-"
    text = _SPACES.sub(" ", str(value)).strip().casefold()
    return text or "-"


MAX_LITERAL_DEPTH = 32  # containers nested deeper than any TravelPlanner field are refused


def literal(text: str) -> Any:
    """Parse a JSON or Python-literal string (never eval). Raises ValueError when neither parses, or when
    its containers nest deeper than MAX_LITERAL_DEPTH."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
            raise ValueError(f"not a JSON or Python literal: {text[:80]!r}") from exc
    if _depth(value) > MAX_LITERAL_DEPTH:
        raise ValueError(f"nested deeper than {MAX_LITERAL_DEPTH} levels: {text[:80]!r}")
    return value


def _depth(value: Any) -> int:
    """Container nesting depth, iteratively (a scalar is 0)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple, set)):
            children = item
        else:
            deepest = max(deepest, depth)
            continue
        deepest = max(deepest, depth + 1)
        if depth + 1 <= MAX_LITERAL_DEPTH:
            stack.extend((child, depth + 1) for child in children)
    return deepest
