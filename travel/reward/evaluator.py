"""Reward-independent plan evaluator: slot validity, grounding, commonsense, budget and hard constraints.

`evaluate_reference_plan(merge_result, row)` scores a merged plan against the row's reference
catalog and the route scaffold shown to both agents. It never reads a human plan and never depends
on reward weights. Everything that depends only on the row (expected routes, allowed cities,
constraint requirements, catalog matches of value strings) lives in `travel.reward.row_index`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Optional

from travel.data.catalog import split_attractions
from travel.reward.route import Route, RouteScores, score_route
from travel.reward.row_index import (
    ATTRACTION_CATEGORY,
    FIELD_CATEGORY,
    LODGING_CATEGORY,
    MEAL_CATEGORY,
    EntityMatch,
    RowIndex,
    row_index,
)
from travel.task.fields import COST_FIELDS, PLAN_FIELDS, Slot, owned_slots

if TYPE_CHECKING:
    from travel.data.row import TravelRow


def plan_value(plan_row: Optional[Mapping[str, Any]], field: str) -> str:
    """A plan cell as stripped text; a missing, None or blank cell is "-"."""
    if not plan_row:
        return "-"
    value = plan_row.get(field)
    text = "" if value is None else str(value).strip()
    return text or "-"


def _mean(values: list, empty: float = 0.0) -> float:
    return sum(values) / len(values) if values else empty


def _harmonic(a: float, b: float) -> float:
    return 2.0 * a * b / (a + b) if a > 0.0 and b > 0.0 else 0.0


@dataclass
class PlanScan:
    """What one pass over the plan's D x 7 cells found."""

    routes: list[Optional[Route]]
    slot_validity: dict[Slot, bool]
    slot_nonempty: dict[Slot, bool]
    slot_cost_known: dict[Slot, bool]  # cost fields only: >= 1 matched entry and every one costed
    grounding_bits: list[bool]
    city_bits: list[bool]
    cost: float
    cost_complete: bool
    meals: list[EntityMatch]
    attractions: list[EntityMatch]
    lodging_by_day: list[Optional[EntityMatch]]  # the day's single matched lodging, else None
    transports: list[EntityMatch]
    transport_validity: list[bool]


def _plan_rows(merge_result: Any, days: int) -> list[Optional[Mapping[str, Any]]]:
    plan = list(getattr(merge_result, "plan", None) or [])[:days]
    return [row if isinstance(row, Mapping) else None for row in plan]


def scan_plan(plan_rows: list[Optional[Mapping[str, Any]]], index: RowIndex) -> PlanScan:
    """Per-slot validity, grounding and city bits, cost and the selected entities (docs/reward.md "Slot validity")."""
    scan = PlanScan([], {}, {}, {}, [], [], 0.0, True, [], [], [], [], [])
    for day in range(1, index.days + 1):
        plan_row = plan_rows[day - 1] if day - 1 < len(plan_rows) else None
        expected = index.expected_routes[day - 1]
        is_move = expected[0] == "move"

        value = plan_value(plan_row, "current_city")
        route = index.route(value) if value != "-" else None
        scan.routes.append(route)
        scan.slot_nonempty[(day, "current_city")] = value != "-"
        scan.slot_validity[(day, "current_city")] = route == expected and index.expected_cities_known[day - 1]

        value = plan_value(plan_row, "transportation")
        scan.slot_nonempty[(day, "transportation")] = value != "-"
        if value == "-":
            valid, known = not is_move, False
        else:
            match = index.transport(value)
            scan.grounding_bits.append(match is not None)
            valid = known = match is not None
            if match is not None:
                trip_date = index.dates[day - 1] if day - 1 < len(index.dates) else ""
                entry = match.entry
                valid = (
                    is_move
                    and (match.origin, match.destination) == expected[1:]
                    and (entry.mode != "flight" or not entry.date or trip_date == entry.date)
                )
                scan.transports.append(match)
                known = match.cost is not None
                scan.cost += match.cost or 0.0
            scan.city_bits.append(valid)
            scan.cost_complete = scan.cost_complete and known
        scan.slot_validity[(day, "transportation")] = valid
        scan.slot_cost_known[(day, "transportation")] = known
        scan.transport_validity.append(valid)

        lodging: Optional[EntityMatch] = None
        for field, category in FIELD_CATEGORY.items():
            slot = (day, field)
            value = plan_value(plan_row, field)
            scan.slot_nonempty[slot] = value != "-"
            if value == "-":
                scan.slot_validity[slot] = slot not in index.required
                scan.slot_cost_known[slot] = False
                continue
            parts = (split_attractions(value) or [value]) if category == ATTRACTION_CATEGORY else [value]
            cities = index.end_city_sets[day - 1] if category == LODGING_CATEGORY else index.day_cities[day - 1]
            all_valid = known = True
            for part in parts:
                match = index.entity(category, part)
                in_city = match is not None and match.city in cities
                scan.grounding_bits.append(match is not None)
                scan.city_bits.append(in_city)
                all_valid = all_valid and in_city
                if match is None:
                    known = False
                    continue
                if category == MEAL_CATEGORY:
                    scan.meals.append(match)
                elif category == ATTRACTION_CATEGORY:
                    scan.attractions.append(match)
                else:
                    lodging = match
                if category != ATTRACTION_CATEGORY:  # attractions cost nothing
                    known = known and match.cost is not None
                    scan.cost += match.cost or 0.0
            scan.slot_validity[slot] = all_valid
            scan.slot_cost_known[slot] = known
            scan.cost_complete = scan.cost_complete and known
        scan.lodging_by_day.append(lodging)
    return scan


def minimum_nights_bits(lodging_by_day: list[Optional[EntityMatch]]) -> list[bool]:
    """One bit per consecutive run of the same lodging: did the run last its minimum nights?"""
    runs: list[tuple[EntityMatch, int]] = []
    previous: Optional[EntityMatch] = None
    for lodging in lodging_by_day:
        if lodging is None:
            previous = None
            continue
        if previous is not None and lodging.identity == previous.identity:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((lodging, 1))
        previous = lodging
    return [nights >= match.entry.minimum_nights for match, nights in runs]


def _diversity(matches: list[EntityMatch]) -> float:
    return len({m.identity for m in matches}) / len(matches) if matches else 1.0


def _passed(soft: float) -> bool:
    return soft >= 1.0 - 1e-9


def _merge_is_clean(merge_result: Any) -> bool:
    counters = ("overlap_count", "self_duplicate_count", "invalid_slot_count", "extra_assignment_count")
    return not getattr(merge_result, "conflict_slots", None) and all(
        not getattr(merge_result, name, 0) for name in counters
    )


def _roles_complete(merge_result: Any, days: int) -> bool:
    """Both actions parse strictly and were accepted whole: exactly their owned slots, nothing dropped."""
    parsed = list(getattr(merge_result, "parsed", None) or [])
    per_agent = list(getattr(merge_result, "per_agent_assignments", None) or [])
    if len(parsed) != 2 or len(per_agent) != 2:
        return False
    for agent_id in (0, 1):
        accepted = per_agent[agent_id]
        if not parsed[agent_id].parse_success or set(accepted) != set(owned_slots(agent_id, days)):
            return False
        if len(accepted) != parsed[agent_id].raw_item_count:
            return False
    return True


def _hard_constraints(
    scan: PlanScan, index: RowIndex, budget_soft: float, budget_pass: bool
) -> dict[str, tuple[float, bool]]:
    """(soft, pass) of each applicable hard constraint; the budget always applies (docs/reward.md "Hard constraints")."""
    hard: dict[str, tuple[float, bool]] = {"budget": (budget_soft, budget_pass)}
    if index.cuisines:
        served = frozenset().union(*(m.cuisines for m in scan.meals))
        soft = sum(cuisine in served for cuisine in index.cuisines) / len(index.cuisines)
        hard["cuisine"] = (soft, _passed(soft))
    lodgings = [m for m in scan.lodging_by_day if m is not None]
    for name, requirements, attribute in (
        ("room_rule", index.house_rules, "house_rule_ok"),
        ("room_type", index.room_types, "room_type_ok"),
    ):
        if requirements:
            bits = [getattr(m, attribute) for m in lodgings]
            hard[name] = (_mean(bits), bool(bits) and all(bits))
    if index.transport_rules:
        ok = index.transport_rules_known and all(m.transport_rule_ok for m in scan.transports)
        hard["transportation"] = (float(ok), ok)
    return hard


def score_plan(merge_result: Any, index: RowIndex) -> dict[str, Any]:
    days = index.days
    plan_rows = _plan_rows(merge_result, days)
    scan = scan_plan(plan_rows, index)
    required = index.required

    coverage = len(getattr(merge_result, "merged_assignments", None) or ()) / (len(PLAN_FIELDS) * days)
    fill_rate = _mean([scan.slot_nonempty[slot] for slot in required])
    required_valid = sum(scan.slot_validity[slot] for slot in required)
    recall = required_valid / len(required) if required else 0.0
    precision = _mean(scan.grounding_bits)
    f1 = _harmonic(precision, recall)

    route: RouteScores = score_route(
        scan.routes, index.expected_routes, index.origin, index.destination, index.allowed_cities,
        index.visiting_city_number,
    )
    modes = {m.entry.mode for m in scan.transports}
    mixes_modes = "self-driving" in modes and bool(modes & {"flight", "taxi"})
    commonsense_softs = {
        "reasonable_route": route.soft,
        "restaurant_diversity": _diversity(scan.meals),
        "attraction_diversity": _diversity(scan.attractions),
        "minimum_nights": _mean(minimum_nights_bits(scan.lodging_by_day), empty=1.0),
        "transport_consistency": _mean(scan.transport_validity) * (not mixes_modes),
        "within_current_city": _mean(scan.city_bits),
        "within_reference": (precision + route.allowed_city_rate + float(index.parse_success)) / 3.0,
        "complete_information": (coverage + fill_rate) / 2.0,
    }
    commonsense_passes = {name: _passed(soft) for name, soft in commonsense_softs.items()}
    commonsense_passes["reasonable_route"] = route.passed

    required_cost_slots = [slot for slot in required if slot[1] in COST_FIELDS]
    budget_cost_slots = set(required_cost_slots) | {
        slot for slot, nonempty in scan.slot_nonempty.items() if nonempty and slot[1] in COST_FIELDS
    }
    required_cost_known = sum(scan.slot_cost_known[slot] for slot in required_cost_slots)
    required_cost_completeness = required_cost_known / len(required_cost_slots) if required_cost_slots else 0.0
    budget_cost_completeness = _mean([scan.slot_cost_known[slot] for slot in budget_cost_slots])
    budget, cost = index.budget, scan.cost
    if budget <= 0:
        margin = 0.0
    elif cost <= budget:
        margin = 1.0
    else:
        margin = max(0.0, 1.0 - (cost - budget) / budget)
    budget_soft = recall * budget_cost_completeness * margin
    budget_pass = scan.cost_complete and budget > 0 and cost <= budget and _passed(recall)

    hard = _hard_constraints(scan, index, budget_soft, budget_pass)
    commonsense_macro = all(commonsense_passes.values())
    hard_macro = all(passed for _, passed in hard.values())
    commonsense_pass_count = sum(commonsense_passes.values())
    hard_pass_count = sum(passed for _, passed in hard.values())

    delivered = len(plan_rows) == days and any(
        plan_value(plan_row, field) != "-" for plan_row in plan_rows for field in PLAN_FIELDS
    )
    completed = (
        len(plan_rows) == days
        and _roles_complete(merge_result, days)
        and _merge_is_clean(merge_result)
        and coverage >= 1.0
        and fill_rate >= 1.0
    )
    ultimate = {
        "reference_plan_delivery": delivered,
        "required_plan_completion": completed,
        "reference_grounding": bool(scan.grounding_bits) and precision >= 1.0,
        "reference_reasonable_route": commonsense_passes["reasonable_route"],
        "reference_route_scaffold_match": route.scaffold_match_rate >= 1.0,
        "reference_complete_information": commonsense_passes["complete_information"],
        "reference_within_current_city": commonsense_passes["within_current_city"],
        "reference_within_reference": commonsense_passes["within_reference"],
        "reference_transport_consistency": commonsense_passes["transport_consistency"],
        "reference_restaurant_diversity": commonsense_passes["restaurant_diversity"],
        "reference_attraction_diversity": commonsense_passes["attraction_diversity"],
        "reference_minimum_nights": commonsense_passes["minimum_nights"],
        "reference_commonsense_micro": commonsense_pass_count / len(commonsense_passes),
        "reference_commonsense_macro": commonsense_macro,
        "reference_budget_pass": budget_pass,
        "reference_hard_micro": hard_pass_count / len(hard),
        "reference_hard_macro": hard_macro,
        "reference_plan_success": commonsense_macro and hard_macro,
    }

    detail: dict[str, Any] = {
        "assignment_coverage": coverage,
        "required_fill_rate": fill_rate,
        "required_grounded_recall": recall,
        "entity_grounding_precision": precision,
        "grounding_f1": f1,
        "within_city_soft": commonsense_softs["within_current_city"],
        "commonsense_soft": _mean(list(commonsense_softs.values())),
        "hard_constraint_soft": _mean([soft for soft, _ in hard.values()]),
        "required_cost_completeness": required_cost_completeness,
        "budget_cost_completeness": budget_cost_completeness,
        "budget_margin_score": margin,
        "budget_constraint_soft": budget_soft,
        "reference_parse_success": float(index.parse_success),
        "estimated_cost": cost,
        "budget": budget,
        "budget_utilization": cost / budget if budget > 0 else 0.0,
        "cost_complete": float(scan.cost_complete),
        "reference_plan_nonempty": float(delivered),
    }
    detail.update({f"ultimate/{name}": float(value) for name, value in ultimate.items()})
    detail.update({f"route_{name}": value for name, value in route.components().items()})
    detail["route_soft"] = route.soft
    for name, soft in commonsense_softs.items():
        detail[f"constraint_soft/{name}"] = soft
        detail[f"constraint_pass/{name}"] = float(commonsense_passes[name])
    for name, (soft, passed) in hard.items():
        detail[f"hard_soft/{name}"] = soft
        detail[f"hard_pass/{name}"] = float(passed)
    detail.update(
        {
            "_aggregate/commonsense_pass_count": float(commonsense_pass_count),
            "_aggregate/commonsense_applicable_count": float(len(commonsense_passes)),
            "_aggregate/hard_pass_count": float(hard_pass_count),
            "_aggregate/hard_applicable_count": float(len(hard)),
            "_aggregate/required_valid_count": float(required_valid),
            "_aggregate/required_slot_count": float(len(required)),
            "_aggregate/grounded_entity_count": float(sum(scan.grounding_bits)),
            "_aggregate/predicted_entity_count": float(len(scan.grounding_bits)),
            "_aggregate/required_cost_known_count": float(required_cost_known),
            "_aggregate/required_cost_slot_count": float(len(required_cost_slots)),
        }
    )
    detail["reference_catalog_counts"] = dict(index.catalog_counts)
    detail["slot_validity"] = dict(scan.slot_validity)
    detail["required_slot_validity"] = {slot: scan.slot_validity[slot] for slot in required}
    return detail


def evaluate_reference_plan(merge_result: Any, row: "TravelRow") -> dict[str, Any]:
    """Score a merged plan against the row (docs/reward.md "Plan evaluator").

    `merge_result` is the merger's MergeResult (plan, parsed, merged_assignments,
    per_agent_assignments and the merge counters). Values are floats except the internal entries
    `reference_catalog_counts`, `slot_validity` and `required_slot_validity` (dicts, the latter two
    keyed by (day, field)), which loggers must drop.
    """
    return score_plan(merge_result, row_index(row))
