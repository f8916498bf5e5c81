"""Reference catalogs: every Description/Content record of a row parsed into typed entries.

API (implementation in progress):
- CatalogEntry, Catalog dataclasses below.
- parse_reference_catalog(records) -> Catalog; raises CatalogParseError naming the record.
- scaled_party_cost, accommodation_satisfies_room_type, accommodation_satisfies_house_rule,
  transportation_satisfies_rule, match_entity, split_attractions, match_transport.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

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

    def counts(self) -> dict[str, int]:
        return {
            "restaurants": len(self.restaurants),
            "attractions": len(self.attractions),
            "accommodations": len(self.accommodations),
            "flights": len(self.flights),
            "taxi": len(self.taxi),
            "self_driving": len(self.self_driving),
        }
