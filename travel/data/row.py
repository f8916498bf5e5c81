"""TravelRow: one normalised TravelPlanner query, with its catalog, scaffold and required slots.

Rows never carry a human plan: normalisation drops `annotated_plan` and `gold_plan` before a row
is built, so nothing downstream can read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

from travel.data.catalog import CatalogParseError, parse_reference_catalog
from travel.data.scaffold import derive_route_scaffold, required_slots
from travel.task.fields import Slot


@dataclass(frozen=True, eq=False)
class TravelRow:
    source_index: int
    id: str
    query: str
    org: str
    dest: str
    days: int
    dates: tuple[str, ...]
    date_text: str  # the raw `date` column, shown verbatim in prompts
    visiting_city_number: int
    people_number: int
    budget: float
    level: str
    local_constraint: Mapping[str, Any]
    reference_information: str
    reference_records: tuple[Mapping[str, str], ...]
    source_split: str = "validation"
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def reference_chars(self) -> int:
        return len(self.reference_information)

    @cached_property
    def catalog(self):
        """The parsed reference catalog (raises CatalogParseError naming the record on bad input)."""
        try:
            return parse_reference_catalog(self.reference_records)
        except CatalogParseError as exc:
            raise CatalogParseError(f"row {self.source_index} ({self.id}): field 'reference_information': {exc}") from exc

    @cached_property
    def scaffold(self):
        return derive_route_scaffold(self.catalog, self.org, self.dates, self.days)

    @cached_property
    def required_slots(self) -> frozenset[Slot]:
        return required_slots(self.scaffold)
