"""Reference catalogs: every Description/Content record of a row parsed into typed entries.

Owns `parse_reference_catalog(records) -> Catalog` and the shared helpers that prompts, budget contract and
evaluator all use so that cost and rule semantics cannot drift: scaled_party_cost, accommodation_satisfies_room_type,
accommodation_satisfies_house_rule, transportation_satisfies_rule, match_entity, split_attractions, match_transport.

Tables are read column by column (travel.data.tables), so names with numbers, commas, '&' or runs of
spaces parse whole. Decisions beyond the earlier parser:
- The City column of restaurants/attractions/accommodations must name the Description's city
  (canonically); a mismatch raises CatalogParseError. Every real record agrees, so a mismatch means a
  mis-assembled record, and silently accepting it would let plans use entities of an unrequested city.
  Likewise a flight row's FlightDate/OriginCityName/DestCityName must agree with its Description.
- "No valid information" contents (any case) and "There is no flight ..." contents give no entries.
- No lru_cache: records are tuples of dicts (unhashable) and hashing their text would cost as much as
  a parse; TravelRow.catalog caches the parse per row.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable, Mapping, Optional, Sequence

from travel.data.tables import FixedWidthTable, TableLayoutError, TableRow, read_fixed_width_table
from travel.data.text import canonical


class CatalogParseError(ValueError):
    """A reference record that cannot be read; the message names the record and the line."""


@dataclass(frozen=True)
class CatalogEntry:
    category: str  # restaurant | attraction | accommodation | transportation
    name: str
    city: str = ""
    cost: Optional[float] = None
    cuisines: tuple[str, ...] = ()
    room_type: str = ""
    house_rules: str = ""
    minimum_nights: float = 1.0
    maximum_occupancy: float = 1.0
    mode: str = ""  # transportation only: flight | self-driving | taxi
    origin: str = ""
    destination: str = ""
    date: str = ""  # flights only, YYYY-MM-DD

    @property
    def identity(self) -> tuple[str, str, str]:
        return (self.category, canonical(self.name), canonical(self.city))


@dataclass(frozen=True)
class Catalog:
    restaurants: tuple[CatalogEntry, ...]
    attractions: tuple[CatalogEntry, ...]
    accommodations: tuple[CatalogEntry, ...]
    transportation: tuple[CatalogEntry, ...]
    dated_routes: tuple[tuple[str, str, str], ...]  # (date, origin, destination) of every Flight description
    parsed_record_count: int
    record_count: int

    @property
    def flights(self) -> tuple[CatalogEntry, ...]:
        return tuple(e for e in self.transportation if e.mode == "flight")

    @property
    def taxi(self) -> tuple[CatalogEntry, ...]:
        return tuple(e for e in self.transportation if e.mode == "taxi")

    @property
    def self_driving(self) -> tuple[CatalogEntry, ...]:
        return tuple(e for e in self.transportation if e.mode == "self-driving")

    @property
    def parse_success(self) -> bool:
        return all((self.restaurants, self.attractions, self.accommodations, self.transportation))

    @cached_property
    def allowed_cities(self) -> frozenset[str]:
        """Canonical cities of every venue plus every transport origin/destination, without "-"."""
        cities = {canonical(e.city) for e in (*self.restaurants, *self.attractions, *self.accommodations)}
        for entry in self.transportation:
            cities.update((canonical(entry.origin), canonical(entry.destination)))
        cities.discard("-")
        return frozenset(cities)

    def counts(self) -> dict[str, int]:
        return {
            "restaurants": len(self.restaurants),
            "attractions": len(self.attractions),
            "accommodations": len(self.accommodations),
            "flights": len(self.flights),
            "taxi": len(self.taxi),
            "self_driving": len(self.self_driving),
        }


# ------------------------------------------------------------------------------------------ parsing

RESTAURANT_COLUMNS = ("Name", "Average Cost", "Cuisines", "Aggregate Rating", "City")
ATTRACTION_COLUMNS = ("Name", "Latitude", "Longitude", "Address", "Phone", "Website", "City")
ACCOMMODATION_COLUMNS = (
    "NAME", "price", "room type", "house_rules", "minimum nights", "maximum occupancy", "review rate number", "city",
)
FLIGHT_COLUMNS = (
    "Flight Number", "Price", "DepTime", "ArrTime", "ActualElapsedTime", "FlightDate", "OriginCityName",
    "DestCityName", "Distance",
)

_DATE = r"\d{4}-\d{2}-\d{2}"
_VENUE_DESCRIPTION = re.compile(r"\s*(restaurants|attractions|accommodations)\s+in\s+(.+?)\s*", re.IGNORECASE)
_FLIGHT_DESCRIPTION = re.compile(rf"\s*flight\s+from\s+(.+?)\s+to\s+(.+?)\s+on\s+({_DATE})\s*", re.IGNORECASE)
_GROUND_DESCRIPTION = re.compile(rf"\s*(self-driving|taxi)\s+from\s+(.+?)\s+to\s+(.+?)(?:\s+on\s+{_DATE})?\s*", re.I)
_GROUND_ROUTE = re.compile(r"\s*(self-driving|taxi)\s*,\s*from\s+(.+?)\s+to\s+(.+?)\s*,", re.IGNORECASE)
_GROUND_COST = re.compile(r"\bcost:\s*(.*?)\s*$", re.IGNORECASE)  # cost is the line's last field
_NUMBER = re.compile(r"\$?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?")
_NO_VALID_INFORMATION = "no valid information"
_NO_FLIGHT = "there is no flight"


class _RecordError(Exception):
    """Raised inside one record's parse; turned into a CatalogParseError naming the record."""

    def __init__(self, problem: str, line: Optional[str] = None):
        super().__init__(problem)
        self.problem, self.line = problem, line


def _number(text: str, column: str, line: str) -> float:
    """'98', '720.0', '1,294', '$5' -> float; anything else (NaN, words, blanks) is an error."""
    match = _NUMBER.fullmatch(text.strip())
    if match is None:
        raise _RecordError(f"column {column!r} is not a number: {text!r}", line)
    return float(match.group(1).replace(",", "") + (match.group(2) or ""))


def _first_line(content: str) -> str:
    return next((line.strip() for line in content.splitlines() if line.strip()), "")


def _table(content: str, columns: Sequence[str]) -> FixedWidthTable:
    try:
        return read_fixed_width_table(content, columns)
    except TableLayoutError as exc:
        raise _RecordError(exc.problem, exc.line if exc.line is not None else None) from None


def _city_of(row: TableRow, column: str, described_city: str) -> str:
    city = row[column]
    if canonical(city) != canonical(described_city):
        raise _RecordError(f"{column} {city!r} differs from the Description's city {described_city!r}", row.text)
    return city


def _restaurants(content: str, city: str) -> list[CatalogEntry]:
    return [
        CatalogEntry(
            category="restaurant",
            name=row["Name"],
            city=_city_of(row, "City", city),
            cost=_number(row["Average Cost"], "Average Cost", row.text),
            cuisines=tuple(c.strip() for c in row["Cuisines"].split(",") if c.strip()),
        )
        for row in _table(content, RESTAURANT_COLUMNS).rows
    ]


def _attractions(content: str, city: str) -> list[CatalogEntry]:
    return [
        CatalogEntry(category="attraction", name=row["Name"], city=_city_of(row, "City", city), cost=0.0)
        for row in _table(content, ATTRACTION_COLUMNS).rows
    ]


def _accommodations(content: str, city: str) -> list[CatalogEntry]:
    return [
        CatalogEntry(
            category="accommodation",
            name=row["NAME"],
            city=_city_of(row, "city", city),
            cost=_number(row["price"], "price", row.text),
            room_type=row["room type"],
            house_rules=row["house_rules"],
            minimum_nights=_number(row["minimum nights"], "minimum nights", row.text),
            maximum_occupancy=max(1.0, _number(row["maximum occupancy"], "maximum occupancy", row.text)),
        )
        for row in _table(content, ACCOMMODATION_COLUMNS).rows
    ]


def _flights(content: str, origin: str, destination: str, date: str) -> list[CatalogEntry]:
    if _first_line(content).casefold().startswith(_NO_FLIGHT):
        return []
    entries = []
    for row in _table(content, FLIGHT_COLUMNS).rows:
        stated = (row["FlightDate"], canonical(row["OriginCityName"]), canonical(row["DestCityName"]))
        if stated != (date, canonical(origin), canonical(destination)):
            raise _RecordError("flight date/origin/destination differ from the Description", row.text)
        if not row["Flight Number"] or " " in row["Flight Number"]:
            raise _RecordError(f"bad flight number {row['Flight Number']!r}", row.text)
        entries.append(
            CatalogEntry(
                category="transportation",
                name=row["Flight Number"],
                cost=_number(row["Price"], "Price", row.text),
                mode="flight",
                origin=origin,
                destination=destination,
                date=date,
            )
        )
    return entries


def _ground(content: str, mode: str, origin: str, destination: str) -> list[CatalogEntry]:
    lines = [line.strip() for line in content.splitlines() if line.strip()]
    if len(lines) != 1:
        raise _RecordError(f"expected one '{mode}, from A to B, ..., cost: N' line, got {len(lines)}")
    line = lines[0]
    route = _GROUND_ROUTE.match(line)
    if route is None or canonical(route.group(1)) != mode:
        raise _RecordError(f"expected a line starting '{mode}, from A to B,'", line)
    if (canonical(route.group(2)), canonical(route.group(3))) != (canonical(origin), canonical(destination)):
        raise _RecordError("route differs from the Description", line)
    cost = _GROUND_COST.search(line)
    if cost is None:
        raise _RecordError("no 'cost: <number>' field", line)
    cost_value = _number(cost.group(1), "cost", line)
    return [CatalogEntry("transportation", mode, cost=cost_value, mode=mode, origin=origin, destination=destination)]


def parse_reference_catalog(records: Iterable[Mapping[str, Any]]) -> Catalog:
    """Parse a row's {"Description", "Content"} records; raises CatalogParseError naming the record."""
    found: dict[str, list[CatalogEntry]] = {c: [] for c in ("restaurant", "attraction", "accommodation", "transportation")}
    dated_routes: list[tuple[str, str, str]] = []
    parsed = 0
    records = tuple(records)
    for position, record in enumerate(records):
        description = record.get("Description") if isinstance(record, Mapping) else None
        content = record.get("Content") if isinstance(record, Mapping) else None
        if not isinstance(description, str) or not isinstance(content, str):
            raise CatalogParseError(f"record {position}: needs string 'Description' and 'Content'")
        try:
            entries, is_transport = _parse_record(description, content, dated_routes)
        except _RecordError as exc:
            where = f"; line {exc.line!r}" if exc.line is not None else ""
            raise CatalogParseError(f"record {position} ({description!r}): {exc.problem}{where}") from None
        for entry in entries:
            found[entry.category].append(entry)
        no_valid = _first_line(content).casefold().startswith(_NO_VALID_INFORMATION)
        parsed += bool(entries) or (is_transport and no_valid)
    venues = (tuple(found["restaurant"]), tuple(found["attraction"]), tuple(found["accommodation"]))
    return Catalog(*venues, tuple(found["transportation"]), tuple(dated_routes), parsed, len(records))


def _parse_record(
    description: str, content: str, dated_routes: list[tuple[str, str, str]]
) -> tuple[list[CatalogEntry], bool]:
    """(entries, is_transport_record); a Flight description also appends to `dated_routes`."""
    no_valid = _first_line(content).casefold().startswith(_NO_VALID_INFORMATION)
    venue = _VENUE_DESCRIPTION.fullmatch(description)
    if venue:
        kind, city = venue.group(1).casefold(), venue.group(2)
        if no_valid:
            return [], False
        parse = {"restaurants": _restaurants, "attractions": _attractions, "accommodations": _accommodations}[kind]
        return parse(content, city), False
    flight = _FLIGHT_DESCRIPTION.fullmatch(description)
    if flight:
        origin, destination, date = flight.groups()
        dated_routes.append((date, origin, destination))
        return ([] if no_valid else _flights(content, origin, destination, date)), True
    ground = _GROUND_DESCRIPTION.fullmatch(description)
    if ground:
        mode, origin, destination = ground.group(1).casefold(), ground.group(2), ground.group(3)
        return ([] if no_valid else _ground(content, mode, origin, destination)), True
    raise _RecordError("unknown Description")


# ------------------------------------------------------------------------------------ shared helpers

_PARTY_SIZE_PER_VEHICLE = {"taxi": 4, "self-driving": 5}
_FLIGHT_VALUE = re.compile(r"\s*flight\s+number\s*:\s*(F\d+)\s*,\s*from\s+(.+?)\s*", re.IGNORECASE | re.DOTALL)
_GROUND_VALUE = re.compile(r"\s*(self-driving|taxi)\s*,\s*from\s+(.+?)\s*", re.IGNORECASE | re.DOTALL)
_TO = re.compile(r"\s+to\s+", re.IGNORECASE)


def _no_requirement(requirement: Any) -> bool:
    return requirement is None or canonical(requirement) == "-"


def scaled_party_cost(entry: CatalogEntry, people: int) -> Optional[float]:
    """Cost of `entry` for the whole party (people floored at 1); None when the entry has no cost."""
    if entry.cost is None:
        return None
    party = max(1, int(people))
    if entry.category == "transportation":
        if entry.mode == "flight":
            return entry.cost * party
        if entry.mode in _PARTY_SIZE_PER_VEHICLE:
            return entry.cost * math.ceil(party / _PARTY_SIZE_PER_VEHICLE[entry.mode])
        raise ValueError(f"unknown transportation mode {entry.mode!r}")
    if entry.category == "restaurant":
        return entry.cost * party
    if entry.category == "accommodation":
        return entry.cost * math.ceil(party / max(1.0, entry.maximum_occupancy))
    if entry.category == "attraction":
        return entry.cost
    raise ValueError(f"unknown catalog category {entry.category!r}")


def accommodation_satisfies_room_type(entry: CatalogEntry, requirement: Any) -> bool:
    if _no_requirement(requirement):
        return True
    wanted, room = canonical(requirement), canonical(entry.room_type)
    if wanted == "not shared room":
        return room != "shared room"
    if wanted == "entire room":
        return room == "entire home/apt"
    return room == wanted


def accommodation_satisfies_house_rule(entry: CatalogEntry, requirement: Any) -> bool:
    """A requirement such as "parties" fails iff the house rules say "No parties"."""
    if _no_requirement(requirement):
        return True
    return f"no {canonical(requirement)}" not in canonical(entry.house_rules)


def transportation_satisfies_rule(entry: CatalogEntry, requirement: Any) -> bool:
    """"no flight" / "no self-driving" forbid that mode; any other rule text fails closed (False)."""
    if _no_requirement(requirement):
        return True
    rule = canonical(requirement)
    if rule == "no flight":
        return entry.mode != "flight"
    if rule == "no self-driving":
        return entry.mode != "self-driving"
    return False


def match_entity(value: Any, entries: Sequence[CatalogEntry]) -> Optional[CatalogEntry]:
    """"<name>, <city>" (split on the LAST comma) -> the first entry with that canonical name and city.

    Bare names never match. Duplicates of one identity resolve to the first row; matches of more than
    one identity (e.g. mixed categories) give None.
    """
    if not isinstance(value, str) or "," not in value:
        return None
    name_text, city_text = value.rsplit(",", 1)
    name, city = canonical(name_text), canonical(city_text)
    if name == "-" or city == "-":
        return None
    matches = [e for e in entries if canonical(e.name) == name and canonical(e.city) == city]
    if not matches or len({e.identity for e in matches}) != 1:
        return None
    return matches[0]


def split_attractions(value: Any) -> list[str]:
    if not isinstance(value, str):
        return []
    return [part.strip() for part in value.split(";") if part.strip()]


def _route_matches(route_text: str, entries: Iterable[CatalogEntry]) -> list[CatalogEntry]:
    """Entries whose canonical route equals "<A> to <B>" for any split of the text at a " to "."""
    splits = {
        (canonical(route_text[: to.start()]), canonical(route_text[to.end() :])) for to in _TO.finditer(route_text)
    }
    return [e for e in entries if (canonical(e.origin), canonical(e.destination)) in splits]


def _unique(matches: list[CatalogEntry]) -> Optional[CatalogEntry]:
    """The single distinct entry (rows repeating every field count once), else None."""
    return matches[0] if matches and len(set(matches)) == 1 else None


def match_transport(value: Any, catalog: Catalog) -> Optional[CatalogEntry]:
    """Full-match "Flight Number: F<digits>, from A to B" or "(Self-driving|Taxi), from A to B".

    Returns the unique catalog entry with that flight number (or mode) and canonical route; any extra
    text, an unknown number or an ambiguous match gives None.
    """
    if not isinstance(value, str):
        return None
    flight = _FLIGHT_VALUE.fullmatch(value)
    if flight:
        number = canonical(flight.group(1))
        candidates = [e for e in catalog.flights if canonical(e.name) == number]
        return _unique(_route_matches(flight.group(2), candidates))
    ground = _GROUND_VALUE.fullmatch(value)
    if ground:
        mode = canonical(ground.group(1))
        candidates = [e for e in catalog.transportation if e.mode == mode]
        return _unique(_route_matches(ground.group(2), candidates))
    return None
