"""Raw hub-format records -> TravelRow, dropping human plans and failing loudly on malformed rows."""

from __future__ import annotations

import math
from typing import Any, Mapping

from travel.data.row import TravelRow
from travel.data.text import canonical, literal

REQUIRED_COLUMNS: tuple[str, ...] = (
    "org",
    "dest",
    "days",
    "visiting_city_number",
    "date",
    "people_number",
    "local_constraint",
    "budget",
    "query",
    "level",
    "reference_information",
)
# Human plans: removed before a row exists, so no prompt, reward or metric can reach them.
TARGET_COLUMNS: frozenset[str] = frozenset({"annotated_plan", "gold_plan"})
LEVELS: tuple[str, ...] = ("easy", "medium", "hard")
MAX_BUDGET = 1e12  # dollars; far above any trip, and small enough that cents stay exact integers


class RowError(ValueError):
    """A malformed source row; the message names the row index and the field."""

    def __init__(self, index: int, column: str, problem: str):
        super().__init__(f"row {index}: field {column!r}: {problem}")
        self.index, self.column = index, column


def _int(raw: Mapping[str, Any], index: int, column: str, minimum: int = 0) -> int:
    value = raw[column]
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise RowError(index, column, f"expected an integer, got {value!r}") from None
    if isinstance(value, bool) or number != float(value) or number < minimum:
        raise RowError(index, column, f"expected an integer >= {minimum}, got {value!r}")
    return number


def _budget(raw: Mapping[str, Any], index: int) -> float:
    value = raw["budget"]
    try:
        budget = float(value)
    except (TypeError, ValueError):
        raise RowError(index, "budget", f"expected a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(budget) or not 0 < budget < MAX_BUDGET:
        raise RowError(index, "budget", f"expected a number > 0 and below {MAX_BUDGET:g}, got {value!r}")
    return budget


def _dates(raw: Mapping[str, Any], index: int, days: int) -> tuple[str, ...]:
    value = raw["date"]
    try:
        dates = literal(value) if isinstance(value, str) else value
    except ValueError:
        raise RowError(index, "date", f"cannot parse {str(value)[:80]!r} as a list of dates") from None
    if not isinstance(dates, (list, tuple)) or not all(isinstance(d, str) for d in dates):
        raise RowError(index, "date", f"expected a list of YYYY-MM-DD strings, got {str(value)[:80]!r}")
    import datetime as _dt

    for d in dates:
        try:
            _dt.date.fromisoformat(d)
        except ValueError:
            raise RowError(index, "date", f"{d!r} is not a YYYY-MM-DD date") from None
    if len(dates) != days:
        raise RowError(index, "date", f"has {len(dates)} dates for a {days}-day trip")
    for day, (before, after) in enumerate(zip(dates, dates[1:]), start=2):
        if _dt.date.fromisoformat(after) - _dt.date.fromisoformat(before) != _dt.timedelta(days=1):
            raise RowError(index, "date", f"day {day} is {after}, not the day after {before}: one date per trip day, in order")
    return tuple(dates)


def _place(raw: Mapping[str, Any], index: int, column: str) -> str:
    value = str(raw[column]).strip()
    if not value:
        raise RowError(index, column, "is empty")
    return value


def _level(raw: Mapping[str, Any], index: int) -> str:
    level = str(raw["level"]).strip().casefold()
    if level not in LEVELS:
        raise RowError(index, "level", f"expected one of {', '.join(LEVELS)}, got {raw['level']!r}")
    return level


def _constraints(raw: Mapping[str, Any], index: int) -> dict[str, Any]:
    value = raw["local_constraint"]
    if value is None or value == "":
        return {}
    try:
        parsed = literal(value) if isinstance(value, str) else value
    except ValueError:
        raise RowError(index, "local_constraint", f"cannot parse {str(value)[:80]!r}") from None
    if not isinstance(parsed, Mapping):
        raise RowError(index, "local_constraint", f"expected a mapping, got {type(parsed).__name__}")
    return dict(parsed)


def _records(raw: Mapping[str, Any], index: int) -> tuple[str, tuple[dict[str, str], ...]]:
    value = raw["reference_information"]
    text = value if isinstance(value, str) else repr(value)
    try:
        records = literal(text) if isinstance(value, str) else value
    except ValueError:
        raise RowError(index, "reference_information", "is not a list of Description/Content records") from None
    if not isinstance(records, (list, tuple)) or not records:
        raise RowError(index, "reference_information", "expected a non-empty list of Description/Content records")
    out = []
    for position, record in enumerate(records):
        if not isinstance(record, Mapping) or not isinstance(record.get("Description"), str) or not isinstance(
            record.get("Content"), str
        ):
            raise RowError(
                index, "reference_information", f"record {position} lacks a string 'Description' and 'Content'"
            )
        out.append({"Description": record["Description"], "Content": record["Content"]})
    return text, tuple(out)


def normalise_row(raw: Mapping[str, Any], index: int, split: str = "validation") -> TravelRow:
    """Build a TravelRow from one hub-format record at position `index` of its split."""
    missing = [c for c in REQUIRED_COLUMNS if c not in raw and not (c == "query" and "prompt" in raw)]
    if missing:
        raise RowError(index, missing[0], "missing column" + (f" (also missing: {', '.join(missing[1:])})" if missing[1:] else ""))
    # a file whose other rows have the key gives this row null: missing here, never filled with a default
    absent = [c for c in REQUIRED_COLUMNS if c in raw and raw[c] is None and not (c == "query" and raw.get("prompt"))]
    if absent:
        raise RowError(index, absent[0], "missing in this row (absent or null)" + (f"; also: {', '.join(absent[1:])}" if absent[1:] else ""))
    query = str(raw.get("query") or raw.get("prompt") or "").strip()
    if not query:
        raise RowError(index, "query", "is empty")
    days = _int(raw, index, "days", minimum=1)
    text, records = _records(raw, index)
    budget = _budget(raw, index)
    extra = {k: v for k, v in raw.items() if k not in REQUIRED_COLUMNS and k not in TARGET_COLUMNS and k != "prompt"}
    org, dest = _place(raw, index, "org"), _place(raw, index, "dest")
    if org.casefold() == dest.casefold():
        raise RowError(index, "dest", f"{dest!r} is the origin too (org): a trip goes somewhere else")
    return TravelRow(
        source_index=index,
        id=str(raw.get("id") or f"travelplanner-{split}-{index}"),
        query=query,
        org=org,
        dest=dest,
        days=days,
        dates=_dates(raw, index, days),
        date_text=str(raw["date"]),
        visiting_city_number=_int(raw, index, "visiting_city_number", minimum=1),
        people_number=_int(raw, index, "people_number", minimum=1),
        budget=budget,
        level=_level(raw, index),
        local_constraint=_constraints(raw, index),
        reference_information=text,
        reference_records=records,
        source_split=split,
        extra=extra,
    )


def check_route(row: TravelRow) -> None:
    """The route scaffold that the row's reference information gives (travel/data/scaffold.py) agrees with its org,
    dest and visiting_city_number: it leaves from org, visits that many cities, and a one-city trip visits dest.
    (Its days are the row's dates, checked above.) Needs the row's catalog."""

    legs = row.scaffold
    moves = [leg for leg in legs if leg.kind == "move"]
    if moves and canonical(moves[0].start) != canonical(row.org):
        raise RowError(row.source_index, "org", f"{row.org!r}, but the route its reference information gives leaves from {moves[0].start!r}")
    visited: dict[str, str] = {}
    for leg in legs:
        for city in leg.cities:
            if canonical(city) != canonical(row.org):
                visited.setdefault(canonical(city), city)
    if len(visited) != row.visiting_city_number:
        cities = ", ".join(visited.values()) or "none"
        raise RowError(
            row.source_index, "visiting_city_number",
            f"{row.visiting_city_number}, but the route its reference information gives visits {len(visited)} ({cities})",
        )
    if row.visiting_city_number == 1 and canonical(row.dest) not in visited:
        raise RowError(row.source_index, "dest", f"{row.dest!r}, but the route its reference information gives visits {', '.join(visited.values())}")
