"""Plan evaluator: the route and commonsense checks and the hard constraints (docs/reward.md "Plan evaluator",
"Reference values"), on the
fixture catalogs (the hand-derived numbers are in the docstring of tests/reward/test_evaluator.py)."""

from __future__ import annotations

import pytest

from tests.fixtures import (
    accommodations_record,
    fixture_row,
    five_day_fixture_row,
    ground_record,
    reference_information,
    three_day_records,
    valid_plan_values,
)
from tests.reward.test_evaluator import edited, evaluate, ultimate


# ---- route and commonsense checks ---------------------------------------------------------------


def test_wrong_route_fails_the_route_check():
    row = fixture_row()
    detail = evaluate(edited(valid_plan_values(row), {(2, "current_city"): "Alpha"}), row)
    assert detail["ultimate/reference_reasonable_route"] == 0.0
    assert detail["ultimate/reference_route_scaffold_match"] == 0.0
    assert detail["route_scaffold_match_rate"] == pytest.approx(2 / 3)
    # day 2 does not start in Beta where day 1 ended; day 3 still leaves from the running city Beta
    assert detail["route_continuity"] == pytest.approx(2 / 3)
    assert detail["route_closed_loop"] == 0.0
    assert detail["ultimate/reference_plan_success"] == 0.0


def test_route_components_of_the_valid_plan():
    row = five_day_fixture_row()
    detail = evaluate(valid_plan_values(row), row)
    for name in ("parse_rate", "continuity", "closed_loop", "visiting_city_count", "allowed_city_rate",
                 "scaffold_match_rate", "starts_at_origin", "no_revisit", "destination_reached"):
        assert detail[f"route_{name}"] == 1.0, name
    assert all(value == 1.0 for value in ultimate(detail).values())
    assert detail["estimated_cost"] == pytest.approx(565.0)


def test_repeated_restaurant_fails_diversity():
    row = fixture_row()
    detail = evaluate(edited(valid_plan_values(row), {(2, "lunch"): "Cafe, Beta"}), row)
    assert detail["constraint_soft/restaurant_diversity"] == pytest.approx(2 / 3)
    assert detail["ultimate/reference_restaurant_diversity"] == 0.0
    assert detail["required_grounded_recall"] == 1.0


def test_minimum_nights_counts_consecutive_nights_of_one_lodging():
    records = three_day_records()
    records[2] = accommodations_record("Beta", [("Hotel", 100, "Private room", "No parties", 3, 2)])
    row = fixture_row(reference_information=reference_information(records))
    assert evaluate(valid_plan_values(row), row)["ultimate/reference_minimum_nights"] == 0.0
    records[2] = accommodations_record("Beta", [("Hotel", 100, "Private room", "No parties", 2, 2)])
    row = fixture_row(reference_information=reference_information(records))
    assert evaluate(valid_plan_values(row), row)["ultimate/reference_minimum_nights"] == 1.0


def test_self_driving_mixed_with_flights_breaks_transport_consistency():
    records = three_day_records() + [ground_record("Self-driving", "Beta", "Alpha", 30)]
    row = fixture_row(reference_information=reference_information(records))
    detail = evaluate(edited(valid_plan_values(row), {(3, "transportation"): "Self-driving, from Beta to Alpha"}), row)
    assert detail["slot_validity"][(3, "transportation")] is True
    assert detail["constraint_soft/transport_consistency"] == 0.0
    assert detail["estimated_cost"] == pytest.approx(290 - 25 + 30)


# ---- hard constraints -------------------------------------------------------------------------


def _with_lodging(row, name: str):
    lodging = f"{name}, Beta"
    return edited(valid_plan_values(row), {(1, "accommodation"): lodging, (2, "accommodation"): lodging})


@pytest.mark.parametrize(
    "room_type, hotel_passes, motel_passes",
    [("private room", True, False), ("entire room", False, True), ("not shared room", True, True),
     ("shared room", False, False)],
)
def test_room_type_hard_check(room_type, hotel_passes, motel_passes):
    row = fixture_row(level="medium", local_constraint={"room type": room_type})
    for lodging, expected in (("Hotel", hotel_passes), ("Motel", motel_passes)):
        detail = evaluate(_with_lodging(row, lodging), row)
        assert detail["hard_pass/room_type"] == float(expected), lodging
        assert detail["_aggregate/hard_applicable_count"] == 2
        assert detail["ultimate/reference_hard_micro"] == (1.0 + expected) / 2
        assert detail["ultimate/reference_plan_success"] == float(expected)


@pytest.mark.parametrize("rule, hotel_passes, motel_passes", [("parties", False, True), ("smoking", True, False)])
def test_house_rule_hard_check(rule, hotel_passes, motel_passes):
    row = fixture_row(level="medium", local_constraint={"house rule": rule})
    for lodging, expected in (("Hotel", hotel_passes), ("Motel", motel_passes)):
        detail = evaluate(_with_lodging(row, lodging), row)
        assert detail["hard_pass/room_rule"] == float(expected), lodging
        assert detail["hard_soft/room_rule"] == float(expected)


def test_mixed_lodging_gives_partial_house_rule_soft():
    row = fixture_row(level="medium", local_constraint={"house rule": "parties"})
    plan = edited(valid_plan_values(row), {(2, "accommodation"): "Motel, Beta"})
    detail = evaluate(plan, row)
    assert detail["hard_soft/room_rule"] == pytest.approx(0.5)
    assert detail["hard_pass/room_rule"] == 0.0


def test_lodging_rule_without_any_lodging_fails():
    row = fixture_row(level="medium", local_constraint={"room type": "private room"})
    plan = edited(valid_plan_values(row), {(1, "accommodation"): "-", (2, "accommodation"): "-"})
    detail = evaluate(plan, row)
    assert detail["hard_soft/room_type"] == 0.0
    assert detail["hard_pass/room_type"] == 0.0


@pytest.mark.parametrize("rule, passes", [("no flight", False), ("no self-driving", True), ("no boats", False)])
def test_transportation_hard_check(rule, passes):
    row = fixture_row(level="medium", local_constraint={"transportation": rule})
    detail = evaluate(valid_plan_values(row), row)
    assert detail["hard_pass/transportation"] == float(passes)
    assert detail["hard_soft/transportation"] == float(passes)
    assert detail["ultimate/reference_hard_macro"] == float(passes)


@pytest.mark.parametrize("rule, passes", [("no flight", True), ("no self-driving", True), ("no boats", False)])
def test_transportation_rule_without_any_transport(rule, passes):
    row = fixture_row(level="medium", local_constraint={"transportation": rule})
    plan = edited(valid_plan_values(row), {(1, "transportation"): "-", (3, "transportation"): "-"})
    detail = evaluate(plan, row)
    assert detail["hard_pass/transportation"] == float(passes)  # known rules hold vacuously, unknown ones fail


@pytest.mark.parametrize(
    "cuisines, soft", [(["Indian"], 1.0), (["French"], 0.0), (["Indian", "French"], 0.5), ("american", 1.0)]
)
def test_cuisine_hard_check(cuisines, soft):
    row = fixture_row(level="medium", local_constraint={"cuisine": cuisines})
    detail = evaluate(valid_plan_values(row), row)  # meals: Cafe Indian, Diner American, Bistro Italian
    assert detail["hard_soft/cuisine"] == pytest.approx(soft)
    assert detail["hard_pass/cuisine"] == float(soft == 1.0)


def test_optional_meals_count_towards_cuisine_coverage():
    row = fixture_row(level="medium", local_constraint={"cuisine": ["French"]})
    detail = evaluate(edited(valid_plan_values(row), {(1, "dinner"): "Brunch, Beta"}), row)
    assert detail["hard_pass/cuisine"] == 1.0


def test_easy_row_has_only_the_budget_constraint():
    row = fixture_row()
    detail = evaluate(valid_plan_values(row), row)
    assert [key for key in detail if key.startswith("hard_pass/")] == ["hard_pass/budget"]
