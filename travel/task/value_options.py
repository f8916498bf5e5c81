"""The values a role's catalog admits for each owned field: what `generation.values=catalog` decodes from.

Each list holds the exact plan values the role prompt's catalog prints (the quoted option values), in
prompt order, plus "-" (the explicit empty value). current_city admits the scaffold's current_city
values of the trip. The lists are per field, not per day: which option fits which day is still the
policy's choice, so a value can be grounded yet wrong for its day or over budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from travel.task.fields import MEAL_FIELDS, action_slots
from travel.task.role_eligibility import (
    checked_catalog,
    checked_scaffold,
    entity_value,
    first_per_identity,
    per_row_cache,
    transport_value,
    unique_entries,
)

if TYPE_CHECKING:
    from travel.data.row import TravelRow

EMPTY_VALUE = "-"


def _with_empty(values) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*values, EMPTY_VALUE]))


@per_row_cache
def field_value_options(row: "TravelRow") -> dict[str, tuple[str, ...]]:
    """Every plan field's admitted values for `row` (each list ends with "-")."""
    catalog = checked_catalog(row)
    restaurants = _with_empty(entity_value(e) for e in first_per_identity(catalog.restaurants))
    options = {
        "current_city": _with_empty(leg.current_city for leg in checked_scaffold(row)),
        "transportation": _with_empty(transport_value(e) for e in unique_entries(catalog.transportation)),
        "accommodation": _with_empty(entity_value(e) for e in first_per_identity(catalog.accommodations)),
        "attraction": _with_empty(entity_value(e) for e in first_per_identity(catalog.attractions)),
    }
    options.update({field: restaurants for field in MEAL_FIELDS})
    return options


def slot_value_options(row: "TravelRow", agent_id: int) -> tuple[tuple[str, ...], ...]:
    """The admitted values of each slot of `agent_id`'s action (a role, or JOINT_ACTION), in slot order."""
    options = field_value_options(row)
    return tuple(options[field] for _, field in action_slots(agent_id, row.days))
