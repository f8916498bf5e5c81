"""Budget contract: floors, feasibility reasons and caps in integer cents (docs/task.md "Budget contract")."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fixtures import (
    accommodations_record,
    attractions_record,
    duplicate_name_raw,
    five_day_fixture_row,
    five_day_records,
    fixture_row,
    flight_record,
    ground_record,
    reference_information,
    restaurants_record,
)
from travel.data.normalise import normalise_row
from travel.task.budget_contract import (
    FEASIBLE,
    FLOORS_EXCEED_BUDGET,
    NO_LOGISTICS_PLAN,
    NO_MEAL_PLAN,
    NON_POSITIVE_BUDGET,
    budget_contract,
    budget_contract_lines,
    split_budget,
)
from travel.task.role_eligibility import cents_down, cents_up, format_money

BETA_RESTAURANTS = [("Cafe", 10, "Indian"), ("Diner", 15, "American"), ("Bistro", 20, "Italian"), ("Brunch", 12, "French")]
BETA_LODGING = [
    ("Hotel", 100, "Private room", "No parties", 1, 2),
    ("Motel", 80, "Entire home/apt", "No smoking", 1, 4),
]


def three_day_row(*, lodging=BETA_LODGING, restaurants=BETA_RESTAURANTS, out_ground=(), back_ground=(), **overrides):
    """The 3-day fixture with a replaceable lodging table and extra ground records per leg:
    out_ground / back_ground are (mode, cost) pairs for Alpha->Beta / Beta->Alpha."""
    records = [
        attractions_record("Beta", ["Museum", "Park"]),
        restaurants_record("Beta", restaurants),
        accommodations_record("Beta", lodging),
        flight_record("Alpha", "Beta", "2022-01-01", [("F100", 20)]),
        *(ground_record(mode, "Alpha", "Beta", cost) for mode, cost in out_ground),
        flight_record("Beta", "Alpha", "2022-01-03", [("F200", 25)]),
        *(ground_record(mode, "Beta", "Alpha", cost) for mode, cost in back_ground),
    ]
    return fixture_row(reference_information=reference_information(records), **overrides)


# ---------------------------------------------------------------------------------------------- money


def test_cents_round_costs_up_and_the_budget_down():
    assert cents_up(0.1 * 3) == 30  # binary noise must not add a cent
    assert cents_up(10.001) == 1001
    assert cents_up(80) == 8000
    assert cents_down(999.999) == 99999
    assert cents_down(1000) == 100000


def test_money_prints_two_decimals_or_unknown():
    assert format_money(58400) == "584.00"
    assert format_money(5) == "0.05"
    assert format_money(-150) == "-1.50"
    assert format_money(None) == "unknown"


# ---------------------------------------------------------------------------------------------- golden values


def test_three_day_fixture_golden_contract():
    contract = budget_contract(fixture_row())
    # flights 20 + 25, Motel 80 for the 2 Beta nights; Cafe 10 + Brunch 12 + Diner 15 on the stay day
    assert contract.team_budget_cents == 100_000
    assert contract.logistics_floor_cents == (20 + 25 + 80 * 2) * 100 == 20_500
    assert contract.experience_floor_cents == (10 + 12 + 15) * 100 == 3_700
    # slack 75,800 split evenly: logistics gets its floor plus half
    assert contract.logistics_cap_cents == 58_400
    assert contract.experience_cap_cents == 41_600
    assert contract.feasible and contract.reason == FEASIBLE


def test_first_duplicate_row_owns_the_restaurant_value():
    contract = budget_contract(normalise_row(duplicate_name_raw(), 0))
    # Burger King is the 98 Pizza row; Indian must come from Cafe 20, so all three are needed: 98 + 20 + 15
    assert contract.experience_floor_cents == 13_300


def test_five_day_fixture_contract():
    contract = budget_contract(five_day_fixture_row())
    # flights 20 + 30 + 25; Hotel 100 for 2 nights in Beta and 2 in Gamma; 10 + 15 + 20 meals in each city
    assert contract.logistics_floor_cents == (75 + 400) * 100
    assert contract.experience_floor_cents == 2 * 45 * 100
    slack = 150_000 - 47_500 - 9_000
    assert contract.logistics_cap_cents == 47_500 + slack // 2 + slack % 2
    assert contract.logistics_cap_cents + contract.experience_cap_cents == 150_000


def test_party_size_scales_every_floor():
    contract = budget_contract(fixture_row(people_number=5, budget=5000))
    # flights per person; Motel sleeps 4 -> 2 rooms at 80 (Hotel would need 3 rooms at 100); meals per person
    assert contract.logistics_floor_cents == (5 * 45 + 2 * 80 * 2) * 100
    assert contract.experience_floor_cents == 5 * 37 * 100


# ---------------------------------------------------------------------------------------------- hard constraints


def test_room_type_requirement_restricts_the_lodging_floor():
    contract = budget_contract(fixture_row(local_constraint={"room type": "private room"}))
    assert contract.logistics_floor_cents == (45 + 100 * 2) * 100  # only the Hotel is a private room


def test_house_rule_requirement_restricts_the_lodging_floor():
    contract = budget_contract(fixture_row(local_constraint={"house rule": "smoking"}))
    assert contract.logistics_floor_cents == (45 + 100 * 2) * 100  # the Motel says "No smoking"


def test_no_eligible_lodging_makes_logistics_infeasible():
    contract = budget_contract(fixture_row(local_constraint={"room type": "shared room"}))
    assert contract.logistics_floor_cents is None
    assert not contract.feasible and contract.reason == NO_LOGISTICS_PLAN
    assert contract.logistics_cap_cents == 50_000 and contract.experience_cap_cents == 50_000


def test_minimum_stay_longer_than_the_city_run_excludes_a_lodging():
    lodging = [("Hotel", 100, "Private room", "No parties", 1, 2), ("Motel", 80, "Entire home/apt", "No smoking", 3, 4)]
    contract = budget_contract(three_day_row(lodging=lodging))
    assert contract.logistics_floor_cents == (45 + 200) * 100


def test_no_flight_rule_without_ground_options_is_infeasible():
    contract = budget_contract(fixture_row(local_constraint={"transportation": "no flight"}))
    assert contract.logistics_floor_cents is None and contract.reason == NO_LOGISTICS_PLAN


def test_no_flight_rule_uses_taxis():
    row = three_day_row(out_ground=[("Taxi", 7)], back_ground=[("Taxi", 9)], local_constraint={"transportation": "no flight"})
    assert budget_contract(row).logistics_floor_cents == (7 + 9 + 160) * 100


def test_unrecognised_transport_rule_fails_closed():
    contract = budget_contract(fixture_row(local_constraint={"transportation": "by boat"}))
    assert contract.logistics_floor_cents is None


def test_taxi_may_mix_with_flights_but_self_driving_may_not():
    mixed = three_day_row(out_ground=[("Taxi", 5)])
    assert budget_contract(mixed).logistics_floor_cents == (5 + 25 + 160) * 100
    # a 1-dollar drive out cannot be combined with the flight back: both legs must come from one family
    one_drive = three_day_row(out_ground=[("Self-driving", 1)])
    assert budget_contract(one_drive).logistics_floor_cents == (20 + 25 + 160) * 100
    both_drives = three_day_row(out_ground=[("Self-driving", 3)], back_ground=[("Self-driving", 4)])
    assert budget_contract(both_drives).logistics_floor_cents == (3 + 4 + 160) * 100


def test_unavailable_middle_flight_with_only_self_driving_is_infeasible():
    records = five_day_records(middle_flights=(), middle_self_driving=40)
    contract = budget_contract(five_day_fixture_row(reference_information=reference_information(records)))
    # leg 2 can only be driven and legs 1 and 3 can only be flown: no single family covers all legs
    assert contract.logistics_floor_cents is None and contract.reason == NO_LOGISTICS_PLAN


def test_requested_cuisine_must_be_covered_by_the_meal_plan():
    contract = budget_contract(fixture_row(local_constraint={"cuisine": ["Italian"]}))
    assert contract.experience_floor_cents == (10 + 12 + 20) * 100  # Bistro replaces Diner
    contract = budget_contract(fixture_row(local_constraint={"cuisine": ["Italian", "French", "American"]}))
    assert contract.experience_floor_cents == (12 + 15 + 20) * 100


def test_uncoverable_cuisine_makes_experience_infeasible():
    contract = budget_contract(fixture_row(local_constraint={"cuisine": ["Thai"]}))
    assert contract.experience_floor_cents is None
    assert contract.reason == NO_MEAL_PLAN
    assert contract.logistics_cap_cents == 50_000 and contract.experience_cap_cents == 50_000


def test_too_few_restaurants_for_three_distinct_meals():
    contract = budget_contract(three_day_row(restaurants=[("Cafe", 10, "Indian"), ("Diner", 15, "American")]))
    assert contract.experience_floor_cents is None and contract.reason == NO_MEAL_PLAN


# ---------------------------------------------------------------------------------------------- caps


def test_floors_above_budget_split_proportionally():
    contract = budget_contract(fixture_row(budget=200))
    assert contract.reason == FLOORS_EXCEED_BUDGET and not contract.feasible
    assert contract.logistics_cap_cents == 20_000 * 20_500 // 24_200
    assert contract.logistics_cap_cents + contract.experience_cap_cents == 20_000


def test_non_positive_budget():
    contract = budget_contract(dataclasses.replace(fixture_row(), budget=0))  # rows refuse it; the contract still handles it
    assert contract.reason == NON_POSITIVE_BUDGET
    assert (contract.logistics_cap_cents, contract.experience_cap_cents) == (0, 0)


@pytest.mark.parametrize(
    "budget, logistics, experience, expected_logistics_cap",
    [
        (100_001, 20_500, 3_700, 20_500 + 37_901),  # odd slack: the extra cent goes to logistics
        (10_001, None, 3_700, 5_001),  # unknown floor: half, rounded up
        (10_000, 0, 0, 5_000),
        (-301, 100, 100, -151),  # floor(-301 * 100 / 200)
    ],
)
def test_caps_always_sum_to_the_budget(budget, logistics, experience, expected_logistics_cap):
    contract = split_budget(budget, logistics, experience)
    assert contract.logistics_cap_cents == expected_logistics_cap
    assert contract.logistics_cap_cents + contract.experience_cap_cents == budget


floors = st.one_of(st.none(), st.integers(min_value=0, max_value=10**7))


@given(budget=st.integers(min_value=-(10**7), max_value=10**8), logistics=floors, experience=floors)
def test_caps_sum_to_the_budget_and_cover_feasible_floors(budget, logistics, experience):
    contract = split_budget(budget, logistics, experience)
    assert contract.logistics_cap_cents + contract.experience_cap_cents == budget
    if contract.feasible:
        assert contract.logistics_cap_cents >= logistics and contract.experience_cap_cents >= experience
        assert abs((contract.logistics_cap_cents - logistics) - (contract.experience_cap_cents - experience)) <= 1


def test_contract_is_computed_once_per_row():
    row = fixture_row()
    assert budget_contract(row) is budget_contract(row)
    assert budget_contract(fixture_row()) is not budget_contract(row)


# ---------------------------------------------------------------------------------------------- prompt block


def test_contract_lines_for_both_roles():
    row = fixture_row()
    logistics = "\n".join(budget_contract_lines(row, 0))
    experience = "\n".join(budget_contract_lines(row, 1))
    for text in (logistics, experience):
        for line in ("team_budget=1000.00", "logistics_floor=205.00", "experience_floor=37.00",
                     "logistics_cap=584.00", "experience_cap=416.00", "feasible=yes"):
            assert line in text.splitlines() or line in text
    assert "YOUR_ROLE=LOGISTICS; YOUR_CAP=584.00; YOUR_REFERENCE_FLOOR=205.00" in logistics
    assert "YOUR_ROLE=EXPERIENCE; YOUR_CAP=416.00; YOUR_REFERENCE_FLOOR=37.00" in experience


def test_infeasible_contract_lines_name_the_reason():
    text = "\n".join(budget_contract_lines(fixture_row(local_constraint={"room type": "shared room"}), 0))
    assert "logistics_floor=unknown" in text
    assert "feasible=no (no_constraint_eligible_logistics_plan)" in text
