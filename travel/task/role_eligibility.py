"""Target-free facts about catalog options shared by the compact role catalogs and the budget contract.

Which scaffold days an option can fill, whether the row's hard constraints allow it, and its
full-party cost in integer cents. Both the prompts and the budget floors read these helpers so the
two cannot drift; the cost and rule semantics themselves come from travel.data.catalog, which the
evaluator uses too.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from functools import wraps
from typing import TYPE_CHECKING, Callable, Iterable, Optional, TypeVar

from travel.data.catalog import (
    Catalog,
    CatalogEntry,
    accommodation_satisfies_house_rule,
    accommodation_satisfies_room_type,
    scaled_party_cost,
    transportation_satisfies_rule,
)
from travel.data.text import canonical

if TYPE_CHECKING:
    from travel.data.row import TravelRow
    from travel.data.scaffold import ScaffoldDay

T = TypeVar("T")


class RoleContextError(ValueError):
    """A row whose reference catalog cannot back a role prompt; the message names the row id."""


def per_row_cache(build: Callable[..., T]) -> Callable[..., T]:
    """Compute `build(row, *args)` once per row object (rows are immutable and hashed by identity)."""
    cache: "weakref.WeakKeyDictionary[TravelRow, dict]" = weakref.WeakKeyDictionary()

    @wraps(build)
    def cached(row: "TravelRow", *args):
        per_row = cache.setdefault(row, {})
        if args not in per_row:
            per_row[args] = build(row, *args)
        return per_row[args]

    return cached


# ---------------------------------------------------------------------------------------------- money


def cents_up(amount: float) -> int:
    """Dollars -> cents rounded UP. The inner round() absorbs binary noise such as 0.1 * 3."""
    return math.ceil(round(float(amount) * 100, 6))


def cents_down(amount: float) -> int:
    return math.floor(round(float(amount) * 100, 6))


def format_money(cents: Optional[int]) -> str:
    """Integer cents as dollars with two decimals; None -> "unknown"."""
    if cents is None:
        return "unknown"
    sign = "-" if cents < 0 else ""
    whole, part = divmod(abs(cents), 100)
    return f"{sign}{whole}.{part:02d}"


def party_cost_cents(entry: CatalogEntry, people: int) -> Optional[int]:
    """Full-party cost of one occurrence (one leg, one night, one meal) in cents, rounded up."""
    cost = scaled_party_cost(entry, people)
    if cost is None or not math.isfinite(cost):
        return None
    return cents_up(cost)


# ---------------------------------------------------------------------------------------------- catalog


def checked_catalog(row: "TravelRow") -> Catalog:
    """The row's parsed catalog; raises RoleContextError naming the row id when it cannot be used."""
    try:
        catalog = row.catalog
    except ValueError as exc:
        raise RoleContextError(f"row {row.id}: reference catalog cannot be parsed: {exc}") from exc
    if not catalog.parse_success:
        empty = [name for name, count in _category_sizes(catalog).items() if count == 0]
        raise RoleContextError(
            f"row {row.id}: reference catalog is incomplete (no parsed {', '.join(empty)}); "
            "refusing to build a prompt from raw tables"
        )
    return catalog


def checked_scaffold(row: "TravelRow") -> tuple["ScaffoldDay", ...]:
    """The row's route scaffold, after the same fail-closed catalog check."""
    checked_catalog(row)
    return row.scaffold


def _category_sizes(catalog: Catalog) -> dict[str, int]:
    return {
        "restaurants": len(catalog.restaurants),
        "attractions": len(catalog.attractions),
        "accommodations": len(catalog.accommodations),
        "transportation": len(catalog.transportation),
    }


def first_per_identity(entries: Iterable[CatalogEntry]) -> tuple[CatalogEntry, ...]:
    """Keep the first row per evaluator identity, mirroring match_entity (the first duplicate wins)."""
    seen: set[tuple[str, str, str]] = set()
    kept = []
    for entry in entries:
        if entry.identity not in seen:
            seen.add(entry.identity)
            kept.append(entry)
    return tuple(kept)


def unique_entries(entries: Iterable[CatalogEntry]) -> tuple[CatalogEntry, ...]:
    """Drop rows that repeat every field of an earlier row (transport is deduplicated only this way)."""
    return tuple(dict.fromkeys(entries))


def entity_value(entry: CatalogEntry) -> str:
    """The exact plan value for a restaurant, attraction or accommodation."""
    return f"{entry.name}, {entry.city}"


def transport_value(entry: CatalogEntry) -> str:
    """The exact plan value for a transport option (what match_transport accepts)."""
    if entry.mode == "flight":
        return f"Flight Number: {entry.name}, from {entry.origin} to {entry.destination}"
    label = "Self-driving" if entry.mode == "self-driving" else entry.mode.capitalize()
    return f"{label}, from {entry.origin} to {entry.destination}"


def days_text(days: Iterable[int]) -> str:
    days = tuple(days)
    return ",".join(str(d) for d in days) if days else "none"


# ---------------------------------------------------------------------------------------------- constraints


@dataclass(frozen=True)
class HardRequirements:
    room_type: object = None
    house_rule: object = None
    transportation: object = None
    cuisines: tuple[str, ...] = ()  # canonical, first mention order, no repeats


def _present(value: object) -> object:
    """None for an absent requirement (None, "", "-", empty list)."""
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return None
    if isinstance(value, str) and canonical(value) == "-":
        return None
    return value


def hard_requirements(row: "TravelRow") -> HardRequirements:
    constraints = row.local_constraint
    cuisine = _present(constraints.get("cuisine"))
    listed = cuisine if isinstance(cuisine, (list, tuple)) else ([cuisine] if cuisine is not None else [])
    cuisines = tuple(dict.fromkeys(c for c in (canonical(x) for x in listed) if c != "-"))
    return HardRequirements(
        room_type=_present(constraints.get("room type")),
        house_rule=_present(constraints.get("house rule")),
        transportation=_present(constraints.get("transportation")),
        cuisines=cuisines,
    )


def lodging_rules_ok(entry: CatalogEntry, requirements: HardRequirements) -> bool:
    return accommodation_satisfies_room_type(entry, requirements.room_type) and accommodation_satisfies_house_rule(
        entry, requirements.house_rule
    )


def transport_rule_ok(entry: CatalogEntry, requirements: HardRequirements) -> bool:
    return transportation_satisfies_rule(entry, requirements.transportation)


def cuisine_hits(entry: CatalogEntry, requested: tuple[str, ...]) -> int:
    """Bitmask of the requested cuisines this restaurant serves (bit i = requested[i])."""
    served = {canonical(c) for c in entry.cuisines}
    return sum(1 << i for i, cuisine in enumerate(requested) if cuisine in served)


# ---------------------------------------------------------------------------------------------- scaffold days


def transport_days(entry: CatalogEntry, scaffold: tuple["ScaffoldDay", ...]) -> tuple[int, ...]:
    """Move days whose leg equals the option's route (and, for a dated flight, whose date is the flight's)."""
    days = []
    for leg in scaffold:
        if leg.kind != "move":
            continue
        if canonical(entry.origin) != canonical(leg.start) or canonical(entry.destination) != canonical(leg.end):
            continue
        if entry.mode == "flight" and entry.date and entry.date != leg.date:
            continue
        days.append(leg.day)
    return tuple(days)


@dataclass(frozen=True)
class CityRun:
    """Consecutive non-final days ending in the same city: the nights one lodging would cover."""

    city: str  # canonical
    days: tuple[int, ...]

    @property
    def nights(self) -> int:
        return len(self.days)


def lodging_runs(scaffold: tuple["ScaffoldDay", ...]) -> tuple[CityRun, ...]:
    """Runs of consecutive days 1..D-1 keyed by each day's end city (day D needs no lodging)."""
    runs: list[CityRun] = []
    for leg in scaffold[:-1]:
        city = canonical(leg.end)
        if runs and runs[-1].city == city and runs[-1].days[-1] == leg.day - 1:
            runs[-1] = CityRun(city, runs[-1].days + (leg.day,))
        else:
            runs.append(CityRun(city, (leg.day,)))
    return tuple(runs)


def lodging_days(entry: CatalogEntry, runs: tuple[CityRun, ...]) -> tuple[int, ...]:
    """Days in the lodging's city whose run is long enough for its minimum stay."""
    city = canonical(entry.city)
    return tuple(d for run in runs if run.city == city and run.nights >= entry.minimum_nights for d in run.days)


def stay_days_by_city(scaffold: tuple["ScaffoldDay", ...]) -> dict[str, tuple[int, ...]]:
    """Canonical city -> stay days spent there (non-consecutive stays are combined)."""
    by_city: dict[str, list[int]] = {}
    for leg in scaffold:
        if leg.kind == "stay":
            by_city.setdefault(canonical(leg.start), []).append(leg.day)
    return {city: tuple(days) for city, days in by_city.items()}
