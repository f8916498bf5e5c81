"""Route scaffold and required-slot mask, derived from dated flight descriptions only.

Both agents see the same scaffold; it fixes which slots are required before either agent acts and
is never inferred from an agent's output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence

from travel.data.text import canonical
from travel.task.fields import MEAL_FIELDS, Slot

if TYPE_CHECKING:
    from travel.data.catalog import Catalog


@dataclass(frozen=True)
class ScaffoldDay:
    day: int
    kind: str  # "move" | "stay"
    start: str
    end: str
    date: str = ""

    @property
    def current_city(self) -> str:
        """The exact current_city value this day expects."""
        return f"from {self.start} to {self.end}" if self.kind == "move" else self.start

    @property
    def cities(self) -> tuple[str, ...]:
        return (self.start, self.end) if self.kind == "move" else (self.start,)


_MOVE = re.compile(r"\s*from\s+(.+?)\s+to\s+(.+?)\s*", re.IGNORECASE | re.DOTALL)


def parse_current_city(value: str) -> Optional[tuple[str, str, str]]:
    """A generated current_city as (kind, start, end); None for "-", empty or a self-loop move."""
    if canonical(value) == "-":
        return None
    move = _MOVE.fullmatch(value)
    if move:
        start, end = move.group(1).strip(), move.group(2).strip()
        if canonical(start) == canonical(end):
            return None  # "from X to X" would let logistics erase the experience role's stay slots
        return ("move", start, end)
    city = value.strip()
    return ("stay", city, city)


def derive_route_scaffold(catalog: "Catalog", org: str, dates: Sequence[str], days: int) -> tuple[ScaffoldDay, ...]:
    """One move/stay leg per day of a trip from `org` on `dates`: a day whose date has a dated flight description
    in the row's reference `catalog` is a move."""
    routes_by_date: dict[str, set[tuple[str, str]]] = {}
    for date, origin, destination in catalog.dated_routes:
        routes_by_date.setdefault(date, set()).add((origin, destination))
    for entry in catalog.transportation:
        if entry.date:
            routes_by_date.setdefault(entry.date, set()).add((entry.origin, entry.destination))

    current = org
    scaffold = []
    for day in range(1, days + 1):
        date = dates[day - 1] if day - 1 < len(dates) else ""
        candidates = sorted(routes_by_date.get(date, ()), key=lambda r: (r[0].casefold(), r[1].casefold()))
        preferred = [r for r in candidates if canonical(r[0]) == canonical(current)]
        if candidates:
            start, end = (preferred or candidates)[0]
            scaffold.append(ScaffoldDay(day, "move", start, end, date))
            current = end
        else:
            scaffold.append(ScaffoldDay(day, "stay", current, current, date))
    return tuple(scaffold)


def required_slots(scaffold: tuple[ScaffoldDay, ...]) -> frozenset[Slot]:
    """current_city every day; transportation on moves; three meals and an attraction on stays;
    accommodation on every day but the last."""
    days = len(scaffold)
    required: set[Slot] = set()
    for leg in scaffold:
        required.add((leg.day, "current_city"))
        if leg.kind == "move":
            required.add((leg.day, "transportation"))
        else:
            required.update((leg.day, f) for f in (*MEAL_FIELDS, "attraction"))
        if leg.day < days:
            required.add((leg.day, "accommodation"))
    return frozenset(required)
