"""Strict parser for one agent's action text, with the recovery paths of docs/task.md "Parsing an action".

`parse_assignments` never raises on model text: undecodable, deeply nested, oversized or oddly typed
input ends as a ParseResult carrying error codes. Strictness (`parse_success`) and recovery are kept
apart: a recovered assignment is returned so metrics and reward shaping can see it, but only a strict
action counts as a valid joint-action component.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable

from travel.task.fields import PLAN_FIELDS

NOT_STRICT_JSON = "not_strict_json"
DECODE_FAILED = "decode_failed"
TOP_LEVEL_TYPE = "top_level_type"
TOP_LEVEL_SCHEMA = "top_level_schema"
INVALID_AGENT_ID = "invalid_agent_id"
AGENT_ID_MISMATCH = "agent_id_mismatch"
ASSIGNMENTS_TYPE = "assignments_type"
ASSIGNMENT_SCHEMA = "assignment_schema"
ASSIGNMENT_VALUE = "assignment_value"
SELF_DUPLICATE = "self_duplicate"
CAPACITY_EXCEEDED = "capacity_exceeded"

PARSER_ERROR_CODES: tuple[str, ...] = (
    NOT_STRICT_JSON,
    DECODE_FAILED,
    TOP_LEVEL_TYPE,
    TOP_LEVEL_SCHEMA,
    INVALID_AGENT_ID,
    AGENT_ID_MISMATCH,
    ASSIGNMENTS_TYPE,
    ASSIGNMENT_SCHEMA,
    ASSIGNMENT_VALUE,
    SELF_DUPLICATE,
    CAPACITY_EXCEEDED,
)

TOP_LEVEL_KEYS = frozenset({"agent_id", "assignments"})
ITEM_KEYS = frozenset({"day", "field", "value"})
# Start positions tried by the raw_decode scan; bounds the work on brace-heavy garbage.
MAX_SCAN_STARTS = 512
# Longer action texts are failed actions, never parsed: no decoder budget writes this much (1,024 tokens of a
# role action are a few KB), and the scan's cost grows with the length, so this bounds every parse.
MAX_ACTION_CHARS = 32_768

_FENCE = re.compile(r"```[ \t]*([A-Za-z]*)[^\n`]*\n(.*?)```", re.DOTALL)
_FENCE_TAGS = frozenset({"", "json", "python", "text"})


@dataclass(frozen=True)
class ParseResult:
    assignments: list[tuple[Any, Any, Any]]  # recovered (day, field, value) triples, types as written
    parse_success: bool
    raw_item_count: int
    invalid_item_count: int
    error: str  # comma-joined error_codes, "" when clean
    decode_success: bool
    strict_json: bool
    schema_valid: bool
    agent_id: int | None
    agent_id_match: bool
    capacity_valid: bool
    error_codes: tuple[str, ...] = field(default=())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _as_text(text: Any) -> str:
    if text is None:
        return ""
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", errors="replace")
    if isinstance(text, str):
        return text
    try:
        return str(text)
    except Exception:  # an object whose __str__ fails is still just undecodable text
        return ""


def _load(candidate: str) -> tuple[bool, Any]:
    """json.loads, then ast.literal_eval; (False, None) when neither parses."""
    try:
        return True, json.loads(candidate)
    except Exception:  # ValueError, RecursionError (deep nesting), oversized ints
        pass
    try:
        with warnings.catch_warnings():  # invalid escapes warn; the result must not depend on warning filters
            warnings.simplefilter("ignore")
            return True, ast.literal_eval(candidate)
    except Exception:  # SyntaxError, ValueError, RecursionError, "too complex" parser errors
        return False, None


def _strip_fences(text: str) -> str:
    blocks = [body for tag, body in _FENCE.findall(text) if tag.casefold() in _FENCE_TAGS]
    if blocks:
        return "\n".join(block.strip() for block in blocks)
    if text.startswith("```"):  # an opened fence that never closes (truncated generation)
        return text.split("\n", 1)[1].strip() if "\n" in text else ""
    return text


def _scan(candidate: str) -> tuple[bool, Any]:
    decoder = json.JSONDecoder()
    starts = 0
    for position, char in enumerate(candidate):
        if char not in "[{":
            continue
        starts += 1
        if starts > MAX_SCAN_STARTS:
            break
        try:
            return True, decoder.raw_decode(candidate, position)[0]
        except Exception:
            continue
    return False, None


def _recover(stripped: str) -> tuple[bool, Any]:
    """Non-strict decoding: fences, json, literal, then the first raw_decode-able bracket."""
    candidate = _strip_fences(stripped)
    fallback: tuple[bool, Any] = (False, None)
    ok, data = _load(candidate)
    if ok and isinstance(data, (dict, list, tuple)):
        return ok, data
    if ok:
        fallback = (True, data)  # a scalar: keep looking for a container, report the scalar otherwise
    for text in dict.fromkeys((candidate, stripped)):
        ok, data = _scan(text)
        if ok:
            return ok, data
    return fallback


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different (json.loads would keep the last of a repeated key)."""
    if len({key for key, _ in pairs}) != len(pairs):
        raise ValueError("a JSON object repeats a key")
    return dict(pairs)


def _decode(text: str) -> tuple[bool, bool, Any]:
    """(strict_json, decode_success, data). Strict JSON holds no object with a repeated key; such a text decodes
    through recovery, not strictly."""
    stripped = text.strip()
    if len(stripped) > MAX_ACTION_CHARS:
        return False, False, None
    try:
        return True, True, json.loads(stripped, object_pairs_hook=_unique_keys)
    except Exception:
        pass
    ok, data = _recover(stripped)
    return False, ok, data


def _slot_key(day: Any, field_name: Any) -> tuple[str, str]:
    """A hashable (day, casefolded field) key for any recovered types (repr keeps 1 and "1" apart)."""
    return repr(day), field_name.casefold() if isinstance(field_name, str) else repr(field_name)


class _Codes:
    def __init__(self) -> None:
        self._codes: dict[str, None] = {}

    def add(self, code: str) -> None:
        self._codes.setdefault(code, None)

    def __contains__(self, code: str) -> bool:
        return code in self._codes

    def as_tuple(self) -> tuple[str, ...]:
        return tuple(self._codes)


def _check_item(item: Any, days: int, valid_fields: frozenset[str], codes: _Codes) -> tuple[Any, Any, Any] | None:
    """Recover one (day, field, value) item, adding its codes; None when nothing is recoverable."""
    if isinstance(item, dict) and "field" in item and "value" in item:
        day = item["day"] if "day" in item else item.get("days")
        triple = (day, item["field"], item["value"])
        if set(item) != ITEM_KEYS:
            codes.add(ASSIGNMENT_SCHEMA)
    elif isinstance(item, (list, tuple)) and len(item) == 3:
        triple = tuple(item)
        codes.add(ASSIGNMENT_SCHEMA)
    else:
        return None
    day, field_name, value = triple
    if not (_is_int(day) and isinstance(field_name, str) and isinstance(value, str)):
        codes.add(ASSIGNMENT_SCHEMA)
    if (_is_int(day) and not 1 <= day <= days) or (
        isinstance(field_name, str) and field_name not in valid_fields
    ) or (isinstance(value, str) and not value.strip()):
        codes.add(ASSIGNMENT_VALUE)
    return triple


def parse_assignments(
    text: Any,
    expected_agent_id: int | None,
    capacity: int,
    days: int,
    valid_fields: Iterable[str] = PLAN_FIELDS,
) -> ParseResult:
    """Parse one agent's action text (docs/task.md "Parsing an action"). Never raises on any `text`."""
    fields = frozenset(valid_fields)
    codes = _Codes()
    strict_json, decode_success, data = _decode(_as_text(text))
    if not strict_json:
        codes.add(NOT_STRICT_JSON)

    def result(assignments=(), raw=0, invalid=0, agent_id=None, schema_valid=False, id_match=False, cap_ok=True):
        error_codes = codes.as_tuple()
        success = strict_json and schema_valid and id_match and cap_ok and SELF_DUPLICATE not in codes
        return ParseResult(
            assignments=list(assignments),
            parse_success=bool(success),
            raw_item_count=raw,
            invalid_item_count=invalid,
            error=",".join(error_codes),
            decode_success=decode_success,
            strict_json=strict_json,
            schema_valid=bool(schema_valid),
            agent_id=agent_id,
            agent_id_match=id_match,
            capacity_valid=cap_ok,
            error_codes=error_codes,
        )

    if not decode_success:
        codes.add(DECODE_FAILED)
        return result()

    agent_id: int | None = None
    if isinstance(data, dict):
        top_level_exact = set(data) == TOP_LEVEL_KEYS
        if _is_int(data.get("agent_id")):
            agent_id = data["agent_id"]
        items = data["assignments"] if "assignments" in data else data.get("slots")
    elif isinstance(data, (list, tuple)):
        top_level_exact, items = False, data
    else:
        codes.add(TOP_LEVEL_TYPE)
        return result()
    if not top_level_exact:
        codes.add(TOP_LEVEL_SCHEMA)
    if agent_id is None:
        codes.add(INVALID_AGENT_ID)
        id_match = False
    else:
        id_match = expected_agent_id is None or agent_id == expected_agent_id
        if not id_match:
            codes.add(AGENT_ID_MISMATCH)
    if not isinstance(items, (list, tuple)):
        codes.add(ASSIGNMENTS_TYPE)
        return result(agent_id=agent_id, id_match=id_match)

    assignments, invalid, seen = [], 0, set()
    for item in items:
        triple = _check_item(item, days, fields, codes)
        if triple is None:
            invalid += 1
            codes.add(ASSIGNMENT_SCHEMA)
            continue
        key = _slot_key(triple[0], triple[1])
        if key in seen:
            codes.add(SELF_DUPLICATE)
        seen.add(key)
        assignments.append(triple)

    capacity_ok = len(items) <= capacity
    if not capacity_ok:
        codes.add(CAPACITY_EXCEEDED)
    items_valid = ASSIGNMENT_SCHEMA not in codes and ASSIGNMENT_VALUE not in codes
    return result(
        assignments=assignments,
        raw=len(items),
        invalid=invalid,
        agent_id=agent_id,
        schema_valid=top_level_exact and items_valid,
        id_match=id_match,
        cap_ok=capacity_ok,
    )
