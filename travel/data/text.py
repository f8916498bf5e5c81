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


def literal(text: str) -> Any:
    """Parse a JSON or Python-literal string (never eval). Raises ValueError when neither parses."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not a JSON or Python literal: {text[:80]!r}") from exc
