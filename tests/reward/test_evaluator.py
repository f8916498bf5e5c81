"""Plan evaluator: slot validity, budget golden values, caching, real rows and robustness (docs/reward.md
"Plan evaluator", "Reference values").

Expected numbers are derived by hand from the fixture catalogs (tests/fixtures.py docstring): the 3-day
valid plan costs 20 + 25 (flights) + 2 x 100 (Hotel nights) + 10 + 15 + 20 (meals) = 290, it has 11
required slots (3 current_city, 2 transportation, 2 accommodation, 4 day-2 experience slots) of which
7 are cost slots (2 transportation, 2 accommodation, 3 meals).
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

import pytest
from hypothesis import given, settings, strategies as st

from tests.fixtures import (
    fixture_row,
    five_day_fixture_row,
    flight_record,
    reference_information,
    role_action_text,
    three_day_records,
    valid_plan_values,
)
from travel.reward.evaluator import evaluate_reference_plan
from travel.reward.row_index import row_index
from travel.task.merger import merge_agent_assignments
from travel.task.fields import PLAN_FIELDS


def merged(plan: list[dict[str, Any]], row):
    texts = [role_action_text(agent, plan, row.days) for agent in (0, 1)]
    return merge_agent_assignments(texts, row.days, [3 * row.days, 4 * row.days])


def evaluate(plan, row) -> dict[str, Any]:
    return evaluate_reference_plan(merged(plan, row), row)


def edited(plan, cells: Mapping[tuple[int, str], str]) -> list[dict[str, Any]]:
    plan = copy.deepcopy(plan)
    for (day, field), value in cells.items():
        plan[day - 1][field] = value
    return plan


def dash_plan(days: int) -> list[dict[str, Any]]:
    return [{"day": day, **{field: "-" for field in PLAN_FIELDS}} for day in range(1, days + 1)]


def ultimate(detail: Mapping[str, Any]) -> dict[str, float]:
    return {key: value for key, value in detail.items() if key.startswith("ultimate/")}


# ---- the valid plan and the budget golden values -------------------------------------------------


def test_valid_plan_scores_every_ultimate_metric_one_and_costs_290():
    row = fixture_row()
    detail = evaluate(valid_plan_values(row), row)
    assert detail["estimated_cost"] == pytest.approx(290.0)
    assert len(ultimate(detail)) == 18
    assert all(value == 1.0 for value in ultimate(detail).values()), ultimate(detail)
    assert detail["required_grounded_recall"] == 1.0
    assert detail["entity_grounding_precision"] == 1.0
    assert detail["grounding_f1"] == 1.0
    assert detail["commonsense_soft"] == 1.0
    assert detail["hard_constraint_soft"] == 1.0
    assert detail["assignment_coverage"] == 1.0


def test_required_slot_and_cost_slot_counts_of_the_three_day_fixture():
    row = fixture_row()
    detail = evaluate(valid_plan_values(row), row)
    assert detail["_aggregate/required_slot_count"] == 11
    assert detail["_aggregate/required_cost_slot_count"] == 7
    # 2 transports + 2 lodging nights + 3 meals + 1 attraction are emitted entities
    assert detail["_aggregate/predicted_entity_count"] == 8
    assert set(detail["required_slot_validity"]) == set(row.required_slots)
    assert len(detail["slot_validity"]) == 21


@pytest.mark.parametrize(
    "budget, margin, passed",
    [(290, 1.0, 1.0), (250, 1.0 - 40 / 250, 0.0), (145, 0.0, 0.0)],
)
def test_budget_margin_and_pass(budget, margin, passed):
    row = fixture_row(budget=budget)
    detail = evaluate(valid_plan_values(row), row)
    assert detail["estimated_cost"] == pytest.approx(290.0)
    assert detail["budget_margin_score"] == pytest.approx(margin)
    assert detail["ultimate/reference_budget_pass"] == passed
    assert detail["hard_pass/budget"] == passed
    assert detail["budget_constraint_soft"] == pytest.approx(margin)
    assert detail["budget_utilization"] == pytest.approx(290.0 / budget)


def test_budget_250_margin_is_084():
    row = fixture_row(budget=250)
    assert evaluate(valid_plan_values(row), row)["budget_margin_score"] == pytest.approx(0.84)


def test_unknown_required_lunch_golden_values():
    row = fixture_row(budget=290)
    detail = evaluate(edited(valid_plan_values(row), {(2, "lunch"): "Nowhere Grill, Beta"}), row)
    assert detail["required_cost_completeness"] == pytest.approx(6 / 7)
    assert detail["budget_cost_completeness"] == pytest.approx(6 / 7)
    assert detail["required_grounded_recall"] == pytest.approx(10 / 11)
    assert detail["budget_margin_score"] == 1.0  # the known cost 275 is within 290
    assert detail["budget_constraint_soft"] == pytest.approx(60 / 77)
    assert detail["ultimate/reference_budget_pass"] == 0.0
    assert detail["cost_complete"] == 0.0


def test_unknown_attraction_golden_values():
    row = fixture_row(budget=290)
    detail = evaluate(edited(valid_plan_values(row), {(2, "attraction"): "Moon Tower, Beta"}), row)
    assert detail["required_cost_completeness"] == 1.0
    assert detail["budget_constraint_soft"] == pytest.approx(10 / 11)
    assert detail["ultimate/reference_budget_pass"] == 0.0


def test_unknown_optional_travel_day_breakfast_golden_values():
    row = fixture_row(budget=290)
    detail = evaluate(edited(valid_plan_values(row), {(1, "breakfast"): "Ghost Diner, Beta"}), row)
    assert detail["required_grounded_recall"] == 1.0  # day 1 is a move: breakfast is optional
    assert detail["required_cost_completeness"] == 1.0
    assert detail["budget_cost_completeness"] == pytest.approx(7 / 8)
    assert detail["budget_constraint_soft"] == pytest.approx(7 / 8)
    assert detail["ultimate/reference_budget_pass"] == 0.0


def test_all_dash_plan_has_no_cost_completeness_and_is_not_delivered():
    row = fixture_row()
    detail = evaluate(dash_plan(3), row)
    assert detail["required_cost_completeness"] == 0.0
    assert detail["budget_constraint_soft"] == 0.0
    assert detail["required_grounded_recall"] == 0.0
    assert detail["ultimate/reference_plan_delivery"] == 0.0
    assert detail["ultimate/reference_plan_success"] == 0.0
    assert detail["assignment_coverage"] == 1.0  # an explicit "-" still counts as covered


def test_hallucinated_plan_is_delivered_but_outside_the_reference():
    row = fixture_row()
    plan = dash_plan(3)
    for day in (1, 2, 3):
        plan[day - 1].update(
            current_city="Atlantis", breakfast="Sea Cafe, Atlantis", accommodation="Reef Inn, Atlantis"
        )
    detail = evaluate(plan, row)
    assert detail["ultimate/reference_plan_delivery"] == 1.0
    assert detail["ultimate/reference_within_reference"] == 0.0
    assert detail["entity_grounding_precision"] == 0.0
    assert detail["route_allowed_city_rate"] == 0.0


def test_two_different_valid_plans_both_succeed():
    row = fixture_row()
    other = edited(
        valid_plan_values(row),
        {(1, "accommodation"): "Motel, Beta", (2, "accommodation"): "Motel, Beta",
         (2, "breakfast"): "Brunch, Beta", (2, "attraction"): "Park, Beta"},
    )
    first, second = evaluate(valid_plan_values(row), row), evaluate(other, row)
    assert first["ultimate/reference_plan_success"] == second["ultimate/reference_plan_success"] == 1.0
    assert second["estimated_cost"] == pytest.approx(20 + 25 + 2 * 80 + 12 + 15 + 20)


def test_annotated_plan_columns_cannot_change_metrics():
    plain = fixture_row()
    annotated = fixture_row(
        annotated_plan=repr([{"days": 1, "current_city": "from Alpha to Gamma"}]),
        gold_plan=repr([{"days": 2, "breakfast": "Brunch, Beta"}]),
    )
    plan = edited(valid_plan_values(plain), {(2, "lunch"): "Brunch, Beta"})
    first, second = evaluate(plan, plain), evaluate(plan, annotated)
    assert first == second
    assert not any("annotated" in key or "gold" in key for key in second)


# ---- slot validity ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cell, value",
    [
        ((2, "lunch"), "Diner"),  # bare name
        ((1, "transportation"), "F100"),  # abbreviated transport
        ((1, "transportation"), "Flight Number: F100"),  # no route
        ((2, "lunch"), "Diner, Beta. Also the best steak in town"),  # claim appended after the city
        ((1, "transportation"), "Flight Number: F100, from Alpha to Beta (on time)"),
        ((1, "accommodation"), "Hotel, Beta, with a pool"),
    ],
)
def test_unsupported_values_get_no_credit(cell, value):
    row = fixture_row()
    detail = evaluate(edited(valid_plan_values(row), {cell: value}), row)
    assert detail["slot_validity"][cell] is False
    assert detail["required_grounded_recall"] == pytest.approx(10 / 11)
    assert detail["entity_grounding_precision"] == pytest.approx(7 / 8)
    assert detail["ultimate/reference_grounding"] == 0.0


def test_accommodation_must_be_in_the_end_of_day_city():
    row = five_day_fixture_row()
    plan = valid_plan_values(row)  # day 3 moves Beta -> Gamma and sleeps in Gamma
    start_city = evaluate(edited(plan, {(3, "accommodation"): "Hotel, Beta"}), row)
    assert start_city["slot_validity"][(3, "accommodation")] is False
    assert start_city["constraint_pass/within_current_city"] == 0.0
    # a meal on that travel day may be in either city of the move
    meal = evaluate(edited(plan, {(3, "breakfast"): "Cafe, Beta", (3, "dinner"): "Bistro, Gamma"}), row)
    assert meal["slot_validity"][(3, "breakfast")] is True
    assert meal["slot_validity"][(3, "dinner")] is True
    assert meal["ultimate/reference_within_current_city"] == 1.0


def test_transport_must_serve_the_scaffold_leg():
    row = fixture_row()
    plan = valid_plan_values(row)
    swapped = evaluate(edited(plan, {(1, "transportation"): "Flight Number: F200, from Beta to Alpha"}), row)
    assert swapped["slot_validity"][(1, "transportation")] is False
    assert swapped["entity_grounding_precision"] == 1.0  # grounded, but on the wrong leg
    assert swapped["constraint_pass/transport_consistency"] == 0.0
    on_stay_day = evaluate(edited(plan, {(2, "transportation"): "Flight Number: F100, from Alpha to Beta"}), row)
    assert on_stay_day["slot_validity"][(2, "transportation")] is False


def test_flight_on_another_date_is_invalid():
    records = three_day_records() + [flight_record("Beta", "Alpha", "2022-01-09", [("F900", 5)])]
    row = fixture_row(reference_information=reference_information(records))
    assert [leg.kind for leg in row.scaffold] == ["move", "stay", "move"]
    plan = edited(valid_plan_values(row), {(3, "transportation"): "Flight Number: F900, from Beta to Alpha"})
    detail = evaluate(plan, row)
    assert detail["slot_validity"][(3, "transportation")] is False


def test_self_loop_current_city_is_invalid_and_keeps_experience_requirements():
    row = fixture_row()
    detail = evaluate(edited(valid_plan_values(row), {(2, "current_city"): "from Beta to Beta"}), row)
    assert detail["slot_validity"][(2, "current_city")] is False
    assert detail["_aggregate/required_slot_count"] == 11
    for field in ("breakfast", "attraction", "lunch", "dinner"):
        assert (2, field) in detail["required_slot_validity"]
        assert detail["slot_validity"][(2, field)] is True
    assert detail["route_parse_rate"] == pytest.approx(2 / 3)


# ---- caching and real rows -----------------------------------------------------------------------


def test_row_index_is_built_once_per_row():
    row = fixture_row()
    assert row_index(row) is row_index(row)
    assert row_index(row) is not row_index(fixture_row())


def _scaffold_plan(row) -> list[dict[str, Any]] | None:
    """A plan built straight from the row's catalog: every scaffold leg served, every stay filled
    with distinct entities of that city. None when the catalog lacks an option somewhere."""
    catalog, plan = row.catalog, []
    used: set[str] = set()

    def pick(entries, city):
        for entry in entries:
            value = f"{entry.name}, {entry.city}"
            if entry.city.casefold() == city.casefold() and value not in used and entry.cost is not None:
                used.add(value)
                return value
        return None

    for leg in row.scaffold:
        day = {"day": leg.day, **{field: "-" for field in PLAN_FIELDS}, "current_city": leg.current_city}
        if leg.kind == "move":
            leg_key = (leg.start, leg.end, leg.date)
            flights = [e for e in catalog.flights if (e.origin, e.destination, e.date) == leg_key]
            if not flights:
                return None
            day["transportation"] = f"Flight Number: {flights[0].name}, from {leg.start} to {leg.end}"
        else:
            for field, entries in (("breakfast", catalog.restaurants), ("attraction", catalog.attractions),
                                   ("lunch", catalog.restaurants), ("dinner", catalog.restaurants)):
                day[field] = pick(entries, leg.start)
                if day[field] is None:
                    return None
        if leg.day < row.days:
            lodging = [e for e in catalog.accommodations if e.city.casefold() == leg.end.casefold()]
            if not lodging:
                return None
            day["accommodation"] = f"{lodging[0].name}, {lodging[0].city}"
        plan.append(day)
    return plan


def test_catalog_built_plans_on_real_rows_are_fully_grounded(real_train_rows):
    checked = 0
    for row in real_train_rows:
        plan = _scaffold_plan(row)
        if plan is None:
            continue
        detail = evaluate(plan, row)
        assert detail["required_grounded_recall"] == 1.0, row.id
        assert detail["entity_grounding_precision"] == 1.0, row.id
        assert detail["route_scaffold_match_rate"] == 1.0, row.id
        assert detail["ultimate/required_plan_completion"] == 1.0, row.id
        dash = evaluate(dash_plan(row.days), row)
        assert dash["required_grounded_recall"] == 0.0 and dash["ultimate/reference_plan_delivery"] == 0.0
        checked += 1
    assert checked >= 10


# ---- robustness ---------------------------------------------------------------------------------

_CELL_VALUES = st.sampled_from([
    "-", "", "   ", "Beta", "Alpha", "from Alpha to Beta", "from Beta to Beta", "from Beta to Alpha", "Gamma",
    "Cafe, Beta", "Museum, Beta; Park, Beta", ";", "Hotel, Beta", "Motel, Beta", "Diner", ",", "Cafe,",
    "Flight Number: F100, from Alpha to Beta", "Flight Number: F200, from Beta to Alpha", "F100", "\u00e9\n,\t",
])
_UNBOUNDED = {"estimated_cost", "budget", "budget_utilization"}


@settings(max_examples=120, deadline=None)
@given(cells=st.dictionaries(st.tuples(st.integers(1, 3), st.sampled_from(PLAN_FIELDS)), _CELL_VALUES))
def test_any_plan_scores_within_the_unit_interval(cells):
    row = fixture_row()
    detail = evaluate(edited(valid_plan_values(row), cells), row)
    for key, value in detail.items():
        if isinstance(value, float) and key not in _UNBOUNDED and not key.startswith("_aggregate/"):
            assert 0.0 <= value <= 1.0, key
    assert detail["_aggregate/required_valid_count"] <= detail["_aggregate/required_slot_count"] == 11
    if detail["ultimate/reference_plan_success"] == 1.0:
        assert detail["required_grounded_recall"] == 1.0 and detail["ultimate/reference_budget_pass"] == 1.0
