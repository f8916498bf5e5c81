"""The deterministic team budget contract: cheapest constraint-compatible role floors and two caps.

Everything is integer cents. The team budget is rounded down and every cost up, so two agents that
each stay at or below their cap can never exceed the float budget together. The floors come only
from the reference catalog, the scaffold and the explicit constraints (never from a human plan);
the caps always sum exactly to the team budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from travel.data.text import canonical
from travel.task.fields import LOGISTICS
from travel.task.role_eligibility import (
    checked_catalog,
    checked_scaffold,
    cents_down,
    cuisine_hits,
    first_per_identity,
    format_money,
    hard_requirements,
    lodging_rules_ok,
    lodging_runs,
    party_cost_cents,
    per_row_cache,
    stay_days_by_city,
    transport_days,
    transport_rule_ok,
    unique_entries,
)

if TYPE_CHECKING:
    from travel.data.row import TravelRow

MEALS_PER_STAY_DAY = 3

FEASIBLE = "feasible"
NON_POSITIVE_BUDGET = "non_positive_budget"
NO_LOGISTICS_PLAN = "no_constraint_eligible_logistics_plan"
NO_MEAL_PLAN = "no_grounded_diverse_meal_plan"
FLOORS_EXCEED_BUDGET = "minimum_role_costs_exceed_budget"


@dataclass(frozen=True)
class BudgetContract:
    team_budget_cents: int
    logistics_floor_cents: Optional[int]  # None: no constraint-eligible transport + lodging plan exists
    experience_floor_cents: Optional[int]  # None: no grounded, diverse, cuisine-covering meal plan exists
    logistics_cap_cents: int
    experience_cap_cents: int
    feasible: bool
    reason: str

    def cap_cents(self, agent_id: int) -> int:
        return self.logistics_cap_cents if agent_id == LOGISTICS else self.experience_cap_cents

    def floor_cents(self, agent_id: int) -> Optional[int]:
        return self.logistics_floor_cents if agent_id == LOGISTICS else self.experience_floor_cents


# ---------------------------------------------------------------------------------------------- floors


def transport_floor_cents(row: "TravelRow") -> Optional[int]:
    """Cheapest legs for every move day, either all self-driving or all flight/taxi (never mixed)."""
    catalog, requirements, scaffold = checked_catalog(row), hard_requirements(row), checked_scaffold(row)
    move_days = [leg.day for leg in scaffold if leg.kind == "move"]
    if not move_days:
        return 0
    options: dict[int, list[tuple[str, int]]] = {day: [] for day in move_days}
    for entry in unique_entries(catalog.transportation):
        cost = party_cost_cents(entry, row.people_number)
        if cost is None or not transport_rule_ok(entry, requirements):
            continue
        for day in transport_days(entry, scaffold):
            options[day].append((entry.mode, cost))
    if any(not day_options for day_options in options.values()):
        return None
    family_totals = []
    for self_driving in (False, True):
        per_leg = [[cost for mode, cost in options[day] if (mode == "self-driving") == self_driving] for day in move_days]
        if all(per_leg):
            family_totals.append(sum(min(costs) for costs in per_leg))
    return min(family_totals) if family_totals else None


def accommodation_floor_cents(row: "TravelRow") -> Optional[int]:
    """Per consecutive city run, the cheapest eligible lodging for all its nights."""
    catalog, requirements = checked_catalog(row), hard_requirements(row)
    lodgings = first_per_identity(catalog.accommodations)
    total = 0
    for run in lodging_runs(checked_scaffold(row)):
        run_costs = []
        for entry in lodgings:
            if canonical(entry.city) != run.city or entry.minimum_nights > run.nights:
                continue
            if not lodging_rules_ok(entry, requirements):
                continue
            nightly = party_cost_cents(entry, row.people_number)
            if nightly is not None:
                run_costs.append(nightly * run.nights)
        if not run_costs:
            return None
        total += min(run_costs)
    return total


def _city_meal_costs(restaurants, needed: int, requested: tuple[str, ...], people: int) -> dict[int, int]:
    """0/1 knapsack over distinct restaurants: cuisine mask -> cheapest cost of exactly `needed` meals."""
    best: dict[tuple[int, int], int] = {(0, 0): 0}
    for entry in sorted(restaurants, key=lambda e: (canonical(e.name), e.name)):
        cost = party_cost_cents(entry, people)
        if cost is None:
            continue
        hits = cuisine_hits(entry, requested)
        for (count, mask), so_far in list(best.items()):
            if count >= needed:
                continue
            state = (count + 1, mask | hits)
            if so_far + cost < best.get(state, so_far + cost + 1):
                best[state] = so_far + cost
    return {mask: cost for (count, mask), cost in best.items() if count == needed}


def experience_floor_cents(row: "TravelRow") -> Optional[int]:
    """Cheapest three distinct restaurants per stay day, jointly covering every requested cuisine."""
    catalog, requested = checked_catalog(row), hard_requirements(row).cuisines
    stays = stay_days_by_city(checked_scaffold(row))
    if not stays:
        return None if requested else 0
    restaurants = first_per_identity(catalog.restaurants)
    combined: dict[int, int] = {0: 0}
    for city, days in stays.items():
        in_city = [e for e in restaurants if canonical(e.city) == city]
        city_costs = _city_meal_costs(in_city, MEALS_PER_STAY_DAY * len(days), requested, row.people_number)
        if not city_costs:
            return None
        merged: dict[int, int] = {}
        for mask_a, cost_a in combined.items():
            for mask_b, cost_b in city_costs.items():
                mask, cost = mask_a | mask_b, cost_a + cost_b
                if cost < merged.get(mask, cost + 1):
                    merged[mask] = cost
        combined = merged
    full = (1 << len(requested)) - 1
    covering = [cost for mask, cost in combined.items() if mask & full == full]
    return min(covering) if covering else None


# ---------------------------------------------------------------------------------------------- contract


def split_budget(budget_cents: int, logistics: Optional[int], experience: Optional[int]) -> BudgetContract:
    """Feasibility reason and caps from the two floors (caps always sum to the team budget)."""
    if budget_cents <= 0:
        reason = NON_POSITIVE_BUDGET
    elif logistics is None:
        reason = NO_LOGISTICS_PLAN
    elif experience is None:
        reason = NO_MEAL_PLAN
    elif logistics + experience > budget_cents:
        reason = FLOORS_EXCEED_BUDGET
    else:
        reason = FEASIBLE
    if reason == FEASIBLE:
        slack = budget_cents - logistics - experience
        logistics_cap = logistics + (slack + 1) // 2
    elif logistics is not None and experience is not None and logistics + experience > 0:
        logistics_cap = budget_cents * logistics // (logistics + experience)
    else:
        logistics_cap = -(-budget_cents // 2)
    return BudgetContract(
        team_budget_cents=budget_cents,
        logistics_floor_cents=logistics,
        experience_floor_cents=experience,
        logistics_cap_cents=logistics_cap,
        experience_cap_cents=budget_cents - logistics_cap,
        feasible=reason == FEASIBLE,
        reason=reason,
    )


@per_row_cache
def budget_contract(row: "TravelRow") -> BudgetContract:
    """The row's contract, computed once per row object."""
    transport, lodging = transport_floor_cents(row), accommodation_floor_cents(row)
    logistics = None if transport is None or lodging is None else transport + lodging
    return split_budget(cents_down(row.budget), logistics, experience_floor_cents(row))


# ---------------------------------------------------------------------------------------------- prompt text


def budget_contract_lines(row: "TravelRow", agent_id: int) -> list[str]:
    """The DETERMINISTIC TEAM BUDGET CONTRACT block of a role prompt."""
    contract = budget_contract(row)
    role = "LOGISTICS" if agent_id == LOGISTICS else "EXPERIENCE"
    if contract.feasible:
        verdict = (
            "feasible=yes: the cheapest constraint-compatible plan of each role fits inside the team budget; "
            "any plan inside your cap is compatible with your teammate's cap."
        )
    else:
        verdict = (
            f"feasible=no ({contract.reason}): no combination of reference floors fits; still submit every required, "
            "grounded value and stay as close to your cap as the catalog allows."
        )
    return [
        "DETERMINISTIC TEAM BUDGET CONTRACT (computed from the reference catalog and explicit constraints only):",
        f"team_budget={format_money(contract.team_budget_cents)}",
        f"logistics_floor={format_money(contract.logistics_floor_cents)}",
        f"experience_floor={format_money(contract.experience_floor_cents)}",
        f"logistics_cap={format_money(contract.logistics_cap_cents)}",
        f"experience_cap={format_money(contract.experience_cap_cents)}",
        f"YOUR_ROLE={role}; YOUR_CAP={format_money(contract.cap_cents(agent_id))}; "
        f"YOUR_REFERENCE_FLOOR={format_money(contract.floor_cents(agent_id))}",
        verdict,
        "Accounting: count each selected occurrence's full-party cost once (the team_cost values in your catalog "
        "already include every traveller). Transportation legs and every lodging night count toward LOGISTICS; "
        "every breakfast, lunch and dinner counts toward EXPERIENCE; current_city, attractions and \"-\" cost 0.",
        "Keep your role's total at or below YOUR_CAP. The budget never excuses a missing or ungrounded required value.",
    ]
