"""Per-row evaluator index: everything the plan evaluator needs that depends only on the row.

Expected scaffold routes, allowed cities, constraint requirements and memoised catalog matches of value
strings are computed once per row and cached by row identity, because the evaluator runs for every joint
action during training.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from travel.data.catalog import (
    CatalogEntry,
    accommodation_satisfies_house_rule,
    accommodation_satisfies_room_type,
    match_entity,
    match_transport,
    scaled_party_cost,
    transportation_satisfies_rule,
)
from travel.data.text import canonical
from travel.reward.route import Route, route_of_leg, route_of_value

if TYPE_CHECKING:
    from travel.data.row import TravelRow

MEAL_CATEGORY, ATTRACTION_CATEGORY, LODGING_CATEGORY = "restaurants", "attractions", "accommodations"
FIELD_CATEGORY: dict[str, str] = {
    "breakfast": MEAL_CATEGORY,
    "lunch": MEAL_CATEGORY,
    "dinner": MEAL_CATEGORY,
    "attraction": ATTRACTION_CATEGORY,
    "accommodation": LODGING_CATEGORY,
}
KNOWN_TRANSPORT_RULES: frozenset[str] = frozenset({"no flight", "no self-driving"})
# Distinct value strings remembered per row and lookup kind; model text is unbounded, memory is not.
MEMO_LIMIT = 4096


@dataclass(frozen=True)
class EntityMatch:
    """A catalog entry matched by a plan value, with everything the evaluator needs precomputed."""

    entry: CatalogEntry
    identity: tuple[str, str, str]
    city: str  # canonical
    cost: Optional[float]  # full-party cost of one occurrence (one meal, one night, one leg)
    cuisines: frozenset[str]  # canonical
    house_rule_ok: bool
    room_type_ok: bool
    transport_rule_ok: bool
    origin: str = ""  # canonical, transportation only
    destination: str = ""


def _requirements(value: Any) -> tuple[str, ...]:
    """A local_constraint value (None, a string or a list) as its non-empty requirement strings."""
    items = value if isinstance(value, (list, tuple, set, frozenset)) else [value]
    return tuple(str(item).strip() for item in items if item is not None and canonical(item) != "-")


class RowIndex:
    """Per-row data for the evaluator, computed once: expected scaffold routes, allowed cities,
    constraint requirements and memoised catalog matches of value strings."""

    def __init__(self, row: "TravelRow"):
        catalog = row.catalog
        self.days = row.days
        self.people = row.people_number
        self.budget = float(row.budget)
        self.dates = tuple(row.dates)
        self.scaffold = tuple(row.scaffold)
        self.required = frozenset(row.required_slots)
        self.origin = canonical(row.org)
        self.destination = canonical(row.dest)
        self.visiting_city_number = row.visiting_city_number
        self.parse_success = bool(catalog.parse_success)
        self.catalog_counts = dict(catalog.counts())
        self.entries: dict[str, tuple[CatalogEntry, ...]] = {
            MEAL_CATEGORY: catalog.restaurants,
            ATTRACTION_CATEGORY: catalog.attractions,
            LODGING_CATEGORY: catalog.accommodations,
        }
        self.catalog = catalog
        self.allowed_cities = catalog.allowed_cities

        self.expected_routes: tuple[Route, ...] = tuple(route_of_leg(leg) for leg in self.scaffold)
        self.day_cities: tuple[frozenset[str], ...] = tuple(frozenset(r[1:]) for r in self.expected_routes)
        self.end_city_sets: tuple[frozenset[str], ...] = tuple(frozenset((r[2],)) for r in self.expected_routes)
        self.expected_cities_known: tuple[bool, ...] = tuple(
            all(city in self.allowed_cities or city == self.origin for city in cities) for cities in self.day_cities
        )

        constraint = row.local_constraint or {}
        self.cuisines = tuple(dict.fromkeys(canonical(c) for c in _requirements(constraint.get("cuisine"))))
        self.house_rules = _requirements(constraint.get("house rule"))
        self.room_types = _requirements(constraint.get("room type"))
        self.transport_rules = _requirements(constraint.get("transportation"))
        self.transport_rules_known = all(canonical(rule) in KNOWN_TRANSPORT_RULES for rule in self.transport_rules)

        self._entity_memo: dict[tuple[str, str], Optional[EntityMatch]] = {}
        self._transport_memo: dict[str, Optional[EntityMatch]] = {}
        self._route_memo: dict[str, Optional[Route]] = {}
        self._match_cache: dict[int, EntityMatch] = {}  # id(entry) -> match; entries live as long as the row

    def _match_of(self, entry: CatalogEntry) -> EntityMatch:
        cached = self._match_cache.get(id(entry))
        if cached is not None:
            return cached
        match = EntityMatch(
            entry=entry,
            identity=entry.identity,
            city=canonical(entry.city),
            cost=scaled_party_cost(entry, self.people),
            cuisines=frozenset(canonical(c) for c in entry.cuisines),
            house_rule_ok=all(accommodation_satisfies_house_rule(entry, rule) for rule in self.house_rules),
            room_type_ok=all(accommodation_satisfies_room_type(entry, room) for room in self.room_types),
            transport_rule_ok=all(transportation_satisfies_rule(entry, rule) for rule in self.transport_rules),
            origin=canonical(entry.origin) if entry.origin else "",
            destination=canonical(entry.destination) if entry.destination else "",
        )
        self._match_cache[id(entry)] = match
        return match

    def _matched(self, entry: Optional[CatalogEntry]) -> Optional[EntityMatch]:
        return None if entry is None else self._match_of(entry)

    def entity(self, category: str, value: str) -> Optional[EntityMatch]:
        """The catalog entry a "Name, City" value names in one category (match_entity), memoised."""
        entries = self.entries[category]
        return _memoised(self._entity_memo, (category, value), lambda: self._matched(match_entity(value, entries)))

    def transport(self, value: str) -> Optional[EntityMatch]:
        """The transport entry a value names exactly (match_transport), memoised."""
        return _memoised(self._transport_memo, value, lambda: self._matched(match_transport(value, self.catalog)))

    def route(self, value: str) -> Optional[Route]:
        """A current_city value as a canonical route, memoised."""
        return _memoised(self._route_memo, value, lambda: route_of_value(value))


def _memoised(memo: dict, key: Any, compute: Callable[[], Any]) -> Any:
    if key in memo:
        return memo[key]
    result = compute()
    if len(memo) < MEMO_LIMIT:
        memo[key] = result
    return result


_INDEX_CACHE: "weakref.WeakKeyDictionary[Any, RowIndex]" = weakref.WeakKeyDictionary()


def row_index(row: "TravelRow") -> RowIndex:
    """The cached RowIndex of a row (rows are immutable and hashed by identity)."""
    index = _INDEX_CACHE.get(row)
    if index is None:
        index = RowIndex(row)
        _INDEX_CACHE[row] = index
    return index
