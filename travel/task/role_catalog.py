"""The compact reference context of a role prompt: the shared route scaffold and the role's own catalog.

Agent 0 (logistics) sees transportation and accommodation options; agent 1 (experience) sees
restaurant and attraction options. Each option line carries its exact plan value, full-party cost,
the scaffold days it can fill and whether the explicit hard constraints allow it. Addresses,
coordinates, phones and websites never appear: only parsed catalog fields are printed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from travel.data.catalog import CatalogEntry
from travel.data.text import canonical
from travel.task.fields import LOGISTICS
from travel.task.role_eligibility import (
    HardRequirements,
    checked_catalog,
    checked_scaffold,
    cuisine_hits,
    days_text,
    entity_value,
    first_per_identity,
    format_money,
    hard_requirements,
    lodging_days,
    lodging_rules_ok,
    lodging_runs,
    party_cost_cents,
    per_row_cache,
    stay_days_by_city,
    transport_days,
    transport_rule_ok,
    transport_value,
    unique_entries,
)

if TYPE_CHECKING:
    from travel.data.row import TravelRow

UNDATED = "9999-99-99"
_NO_COST = float("inf")


def quoted(value: str) -> str:
    """A value exactly as it must appear inside the JSON action."""
    return json.dumps(value, ensure_ascii=False)


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


# ---------------------------------------------------------------------------------------------- scaffold


@per_row_cache
def scaffold_lines(row: "TravelRow") -> tuple[str, ...]:
    """The route scaffold block, identical in both role prompts."""
    lines = [
        "SHARED REFERENCE-DERIVED ROUTE SCAFFOLD",
        "(deterministic, derived only from the dated flight descriptions of the reference information; both agents "
        "see exactly these lines. It fixes each day's move/stay kind and current_city but selects no entity.)",
    ]
    for leg in checked_scaffold(row):
        date = f" date={leg.date}" if leg.date else ""
        if leg.kind == "move":
            lines.append(
                f"- day={leg.day}{date} kind=move current_city={quoted(leg.current_city)} "
                "transportation=choose_exact_catalog_option_for_this_route"
            )
        else:
            lines.append(f"- day={leg.day}{date} kind=stay current_city={quoted(leg.current_city)} transportation=\"-\"")
    return tuple(lines)


# ---------------------------------------------------------------------------------------------- logistics


def transportation_lines(row: "TravelRow", requirements: HardRequirements) -> list[str]:
    scaffold = checked_scaffold(row)
    rows = []
    for entry in unique_entries(checked_catalog(row).transportation):
        cost = party_cost_cents(entry, row.people_number)
        days = transport_days(entry, scaffold)
        eligible = transport_rule_ok(entry, requirements) and cost is not None and bool(days)
        sort_key = (
            not eligible,
            entry.date or UNDATED,
            canonical(entry.origin),
            canonical(entry.destination),
            _NO_COST if cost is None else cost,
            entry.mode,
            canonical(entry.name),
        )
        line = (
            f"- {quoted(transport_value(entry))} | team_cost={format_money(cost)} | days={days_text(days)} "
            f"| eligible={yes_no(eligible)}"
        )
        rows.append((sort_key, line))
    return [line for _, line in sorted(rows, key=lambda r: r[0])]


def accommodation_lines(row: "TravelRow", requirements: HardRequirements) -> list[str]:
    runs = lodging_runs(checked_scaffold(row))
    rows = []
    for entry in first_per_identity(checked_catalog(row).accommodations):
        cost = party_cost_cents(entry, row.people_number)
        days = lodging_days(entry, runs)
        eligible = lodging_rules_ok(entry, requirements) and cost is not None and bool(days)
        sort_key = (canonical(entry.city), not eligible, _NO_COST if cost is None else cost, canonical(entry.name))
        rules = entry.house_rules.strip() or "none"
        line = (
            f"- {quoted(entity_value(entry))} | team_cost_per_night={format_money(cost)} | days={days_text(days)} "
            f"| room={entry.room_type or 'unknown'} | rules={rules} | min_nights={number_text(entry.minimum_nights)} "
            f"| eligible={yes_no(eligible)}"
        )
        rows.append((sort_key, line))
    return [line for _, line in sorted(rows, key=lambda r: r[0])]


# ---------------------------------------------------------------------------------------------- experience


def _stay_days_of(entry: CatalogEntry, stays: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    return stays.get(canonical(entry.city), ())


def restaurant_lines(row: "TravelRow", requirements: HardRequirements) -> list[str]:
    stays = stay_days_by_city(checked_scaffold(row))
    rows = []
    for entry in first_per_identity(checked_catalog(row).restaurants):
        cost = party_cost_cents(entry, row.people_number)
        days = _stay_days_of(entry, stays)
        eligible = cost is not None and bool(days)
        hit = cuisine_hits(entry, requirements.cuisines) != 0
        sort_key = (canonical(entry.city), not eligible, not hit, _NO_COST if cost is None else cost, canonical(entry.name))
        cuisines = ", ".join(entry.cuisines) if entry.cuisines else "unknown"
        line = (
            f"- {quoted(entity_value(entry))} | team_cost_per_meal={format_money(cost)} | days={days_text(days)} "
            f"| cuisines={cuisines} | eligible={yes_no(eligible)}"
        )
        rows.append((sort_key, line))
    return [line for _, line in sorted(rows, key=lambda r: r[0])]


def attraction_lines(row: "TravelRow") -> list[str]:
    stays = stay_days_by_city(checked_scaffold(row))
    rows = []
    for entry in first_per_identity(checked_catalog(row).attractions):
        days = _stay_days_of(entry, stays)
        line = f"- {quoted(entity_value(entry))} | days={days_text(days)} | eligible={yes_no(bool(days))}"
        rows.append(((canonical(entry.city), canonical(entry.name)), line))
    return [line for _, line in sorted(rows, key=lambda r: r[0])]


# ---------------------------------------------------------------------------------------------- assembly


@per_row_cache
def role_catalog_lines(row: "TravelRow", agent_id: int) -> tuple[str, ...]:
    """The ROLE-SPECIFIC COMPACT REFERENCE CATALOG block for one agent."""
    requirements = hard_requirements(row)
    lines = ["ROLE-SPECIFIC COMPACT REFERENCE CATALOG (only the options your role may assign; copy values exactly)"]
    if agent_id == LOGISTICS:
        lines.append(
            "TRANSPORTATION OPTIONS (team_cost = whole party, one leg; use only on a listed day; "
            "eligible=no options break a hard constraint, have no known cost or fit no scaffold day):"
        )
        lines += transportation_lines(row, requirements) or ["- none"]
        lines.append(
            "ACCOMMODATION OPTIONS (team_cost_per_night = whole party, one night; days = nights where the "
            "consecutive city run satisfies min_nights):"
        )
        lines += accommodation_lines(row, requirements) or ["- none"]
    else:
        lines.append(
            "RESTAURANT OPTIONS (team_cost_per_meal = whole party, one meal; days = stay days in that city; "
            "requested cuisines sort first within a city):"
        )
        lines += restaurant_lines(row, requirements) or ["- none"]
        lines.append(
            "ATTRACTION OPTIONS (assign exactly one value per required stay day; never join several attractions "
            "in one slot):"
        )
        lines += attraction_lines(row) or ["- none"]
    return tuple(lines)


@per_row_cache
def compact_context_lines(row: "TravelRow", agent_id: int) -> tuple[str, ...]:
    """Scaffold followed by the role catalog: the REFERENCE-DERIVED PLANNING CONTEXT of a prompt."""
    return scaffold_lines(row) + role_catalog_lines(row, agent_id)
