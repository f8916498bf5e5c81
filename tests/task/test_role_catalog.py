"""Compact role catalogs, the shared scaffold block and the day checklist (docs/task.md "Role catalogs",
"Day checklist and hard-constraint duty")."""

from __future__ import annotations

import pytest

from tests.fixtures import (
    accommodations_record,
    duplicate_name_raw,
    five_day_fixture_row,
    five_day_records,
    fixture_raw,
    fixture_row,
    flight_record,
    ground_record,
    reference_information,
    restaurants_record,
    three_day_records,
)
from travel.data.normalise import normalise_row
from travel.task.role_catalog import compact_context_lines, role_catalog_lines, scaffold_lines
from travel.task.role_checklist import day_checklist_lines, hard_duty_lines
from travel.task.role_eligibility import RoleContextError


def section(lines, header: str) -> list[str]:
    """The option lines under a catalog header, up to the next header."""
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    block = []
    for line in lines[start + 1 :]:
        if not line.startswith("- "):
            break
        block.append(line)
    return block


def with_lodging(lodging, **overrides):
    records = three_day_records()
    records[2] = accommodations_record("Beta", lodging)
    return fixture_row(reference_information=reference_information(records), **overrides)


# ---------------------------------------------------------------------------------------------- logistics


def test_logistics_catalog_lines_of_the_fixture():
    lines = role_catalog_lines(fixture_row(), 0)
    assert section(lines, "TRANSPORTATION OPTIONS") == [
        '- "Flight Number: F100, from Alpha to Beta" | team_cost=20.00 | days=1 | eligible=yes',
        '- "Flight Number: F200, from Beta to Alpha" | team_cost=25.00 | days=3 | eligible=yes',
    ]
    assert section(lines, "ACCOMMODATION OPTIONS") == [
        '- "Motel, Beta" | team_cost_per_night=80.00 | days=1,2 | room=Entire home/apt | rules=No smoking '
        "| min_nights=1 | eligible=yes",
        '- "Hotel, Beta" | team_cost_per_night=100.00 | days=1,2 | room=Private room | rules=No parties '
        "| min_nights=1 | eligible=yes",
    ]


def test_room_type_requirement_marks_lodging_ineligible_and_sorts_it_last():
    lines = section(role_catalog_lines(fixture_row(local_constraint={"room type": "private room"}), 0), "ACCOMMODATION")
    assert lines[0].startswith('- "Hotel, Beta"') and lines[0].endswith("eligible=yes")
    assert lines[1].startswith('- "Motel, Beta"') and "room=Entire home/apt" in lines[1]
    assert lines[1].endswith("eligible=no")


def test_house_rule_requirement_marks_lodging_ineligible():
    lines = section(role_catalog_lines(fixture_row(local_constraint={"house rule": "parties"}), 0), "ACCOMMODATION")
    hotel = next(line for line in lines if '"Hotel, Beta"' in line)
    assert "rules=No parties" in hotel and hotel.endswith("eligible=no")


def test_no_flight_rule_marks_flights_ineligible():
    lines = section(role_catalog_lines(fixture_row(local_constraint={"transportation": "no flight"}), 0), "TRANSPORT")
    assert len(lines) == 2 and all(line.endswith("eligible=no") for line in lines)


def test_minimum_stay_longer_than_the_run_has_no_days():
    row = with_lodging([("Hotel", 100, "Private room", "No parties", 1, 2), ("Motel", 80, "Entire home/apt", "No smoking", 3, 4)])
    lines = section(role_catalog_lines(row, 0), "ACCOMMODATION OPTIONS")
    motel = next(line for line in lines if '"Motel, Beta"' in line)
    hotel = next(line for line in lines if '"Hotel, Beta"' in line)
    assert "min_nights=3" in motel and "days=none" in motel and motel.endswith("eligible=no")
    assert "days=1,2" in hotel and hotel.endswith("eligible=yes")
    assert lines.index(hotel) < lines.index(motel)


def test_costs_are_full_party_costs():
    row = fixture_row(people_number=7)
    logistics = "\n".join(role_catalog_lines(row, 0))
    experience = "\n".join(role_catalog_lines(row, 1))
    assert '"Flight Number: F100, from Alpha to Beta" | team_cost=140.00' in logistics
    assert '"Hotel, Beta" | team_cost_per_night=400.00' in logistics  # 4 rooms sleeping 2
    assert '"Motel, Beta" | team_cost_per_night=160.00' in logistics  # 2 rooms sleeping 4
    assert '"Cafe, Beta" | team_cost_per_meal=70.00' in experience


def test_ground_options_are_listed_with_group_costs():
    records = three_day_records() + [ground_record("Taxi", "Alpha", "Beta", 30), ground_record("Self-driving", "Beta", "Alpha", 40)]
    row = fixture_row(reference_information=reference_information(records), people_number=6)
    lines = section(role_catalog_lines(row, 0), "TRANSPORTATION OPTIONS")
    assert '- "Taxi, from Alpha to Beta" | team_cost=60.00 | days=1 | eligible=yes' in lines  # 2 taxis of 4
    assert '- "Self-driving, from Beta to Alpha" | team_cost=80.00 | days=3 | eligible=yes' in lines  # 2 cars of 5


def test_flight_on_another_date_fits_no_day():
    records = three_day_records() + [flight_record("Alpha", "Beta", "2022-01-09", [("F999", 5)])]
    row = fixture_row(reference_information=reference_information(records))
    lines = section(role_catalog_lines(row, 0), "TRANSPORTATION OPTIONS")
    assert lines[-1] == '- "Flight Number: F999, from Alpha to Beta" | team_cost=5.00 | days=none | eligible=no'


# ---------------------------------------------------------------------------------------------- experience


def test_experience_catalog_lines_of_the_fixture():
    lines = role_catalog_lines(fixture_row(), 1)
    assert section(lines, "RESTAURANT OPTIONS") == [
        '- "Cafe, Beta" | team_cost_per_meal=10.00 | days=2 | cuisines=Indian | eligible=yes',
        '- "Brunch, Beta" | team_cost_per_meal=12.00 | days=2 | cuisines=French | eligible=yes',
        '- "Diner, Beta" | team_cost_per_meal=15.00 | days=2 | cuisines=American | eligible=yes',
        '- "Bistro, Beta" | team_cost_per_meal=20.00 | days=2 | cuisines=Italian | eligible=yes',
    ]
    assert section(lines, "ATTRACTION OPTIONS") == [
        '- "Museum, Beta" | days=2 | eligible=yes',
        '- "Park, Beta" | days=2 | eligible=yes',
    ]
    assert any("never join" in line for line in lines)


def test_requested_cuisine_sorts_first():
    lines = section(role_catalog_lines(fixture_row(local_constraint={"cuisine": ["Italian"]}), 1), "RESTAURANT")
    assert lines[0].startswith('- "Bistro, Beta"')


def test_duplicate_restaurant_name_keeps_the_first_row_only():
    lines = section(role_catalog_lines(normalise_row(duplicate_name_raw(), 0), 1), "RESTAURANT OPTIONS")
    burger = [line for line in lines if "Burger King" in line]
    assert burger == ['- "Burger King, Beta" | team_cost_per_meal=98.00 | days=2 | cuisines=Pizza | eligible=yes']


def test_restaurants_outside_the_stay_cities_are_not_eligible():
    records = three_day_records() + [restaurants_record("Alpha", [("Home Diner", 9, "American")])]
    row = fixture_row(reference_information=reference_information(records))
    lines = section(role_catalog_lines(row, 1), "RESTAURANT OPTIONS")
    assert '- "Home Diner, Alpha" | team_cost_per_meal=9.00 | days=none | cuisines=American | eligible=no' in lines


# ---------------------------------------------------------------------------------------------- ownership


def test_each_role_sees_only_its_own_entities():
    row = fixture_row()
    logistics = "\n".join(role_catalog_lines(row, 0))
    experience = "\n".join(role_catalog_lines(row, 1))
    for own in ("Flight Number: F100", "Hotel, Beta", "Motel, Beta"):
        assert own in logistics and own not in experience
    for own in ("Cafe, Beta", "Bistro, Beta", "Museum, Beta", "Park, Beta"):
        assert own in experience and own not in logistics


def test_no_address_coordinate_phone_or_website_is_shown():
    row = fixture_row()
    text = "\n".join(compact_context_lines(row, 0) + compact_context_lines(row, 1))
    for hidden in ("Main St", "ZZ 0000", "(555)", "http", "example.org", "40.1", "-75.2", "Latitude", "Phone"):
        assert hidden not in text


# ---------------------------------------------------------------------------------------------- scaffold


def test_scaffold_lines_of_the_fixture():
    assert scaffold_lines(fixture_row())[2:] == (
        '- day=1 date=2022-01-01 kind=move current_city="from Alpha to Beta" '
        "transportation=choose_exact_catalog_option_for_this_route",
        '- day=2 date=2022-01-02 kind=stay current_city="Beta" transportation="-"',
        '- day=3 date=2022-01-03 kind=move current_city="from Beta to Alpha" '
        "transportation=choose_exact_catalog_option_for_this_route",
    )


def test_both_roles_share_the_scaffold_block():
    row = five_day_fixture_row()
    assert compact_context_lines(row, 0)[: len(scaffold_lines(row))] == compact_context_lines(row, 1)[: len(scaffold_lines(row))]


def test_unavailable_middle_flight_keeps_the_move_and_lists_self_driving_separately():
    records = five_day_records(middle_flights=(), middle_self_driving=40)
    row = five_day_fixture_row(reference_information=reference_information(records))
    kinds = [line.split(" kind=")[1].split(" ")[0] for line in scaffold_lines(row)[2:]]
    assert kinds == ["move", "stay", "move", "stay", "move"]
    assert '- day=3 date=2022-01-03 kind=move current_city="from Beta to Gamma"' in scaffold_lines(row)[4]
    shared = len(scaffold_lines(row))
    assert compact_context_lines(row, 0)[:shared] == compact_context_lines(row, 1)[:shared] == scaffold_lines(row)
    transport = section(role_catalog_lines(row, 0), "TRANSPORTATION OPTIONS")
    assert '- "Self-driving, from Beta to Gamma" | team_cost=40.00 | days=3 | eligible=yes' in transport
    assert not any("from Beta to Gamma" in line and "Flight" in line for line in transport)
    # the extra taxis run against the route, so they fit no day
    assert '- "Taxi, from Gamma to Beta" | team_cost=5.00 | days=none | eligible=no' in transport


# ---------------------------------------------------------------------------------------------- checklist


def test_experience_checklist_lines():
    lines = day_checklist_lines(fixture_row(), 1)
    assert lines[1] == 'day=1: breakfast, attraction, lunch, dinner are EMPTY; use "-" for all four'
    assert lines[2].startswith("day=2: breakfast, lunch, and dinner are REQUIRED distinct")
    assert "attraction is REQUIRED as exactly one" in lines[2]
    assert lines[3] == 'day=3: breakfast, attraction, lunch, dinner are EMPTY; use "-" for all four'


def test_logistics_checklist_lines():
    lines = day_checklist_lines(fixture_row(), 0)
    assert lines[1].startswith('day=1: current_city=EXACT "from Alpha to Beta"; transportation=REQUIRED')
    assert "accommodation=REQUIRED" in lines[1]
    assert lines[2].startswith('day=2: current_city=EXACT "Beta"; transportation=EMPTY: use "-"')
    assert 'accommodation=EMPTY: use "-"' in lines[3]


def required_fields(agent_id: int, line: str) -> set[str]:
    if agent_id == 0:
        return {f for f in ("transportation", "accommodation") if f"{f}=REQUIRED" in line}
    meals = {"breakfast", "lunch", "dinner"} if "lunch, and dinner are REQUIRED" in line else set()
    return meals | ({"attraction"} if "attraction is REQUIRED" in line else set())


@pytest.mark.parametrize("make_row", [fixture_row, five_day_fixture_row])
def test_checklist_marks_exactly_the_required_slots(make_row):
    row = make_row()
    marked = {
        (day, field)
        for agent_id in (0, 1)
        for day, line in enumerate(day_checklist_lines(row, agent_id)[1:], start=1)
        for field in required_fields(agent_id, line)
    }
    assert marked == {slot for slot in row.required_slots if slot[1] != "current_city"}


def test_hard_duty_lines():
    experience = "\n".join(hard_duty_lines(fixture_row(local_constraint={"cuisine": ["Indian", "French"]}), 1))
    assert 'Requested cuisine coverage=["indian", "french"]' in experience
    assert "never output multiple attractions in one slot" in experience
    assert "Requested cuisine coverage=none" in "\n".join(hard_duty_lines(fixture_row(), 1))
    logistics = "\n".join(hard_duty_lines(fixture_row(local_constraint={"room type": "private room"}), 0))
    assert 'Requested room type="private room"' in logistics
    assert "Never mix self-driving with flight or taxi" in logistics


# ---------------------------------------------------------------------------------------------- failure


def test_broken_reference_fails_closed_naming_the_row():
    records = [r for r in three_day_records() if not r["Description"].startswith("Accommodations")]
    row = fixture_row(id="broken-row-7", reference_information=reference_information(records))
    for agent_id in (0, 1):
        with pytest.raises(RoleContextError, match="broken-row-7"):
            compact_context_lines(row, agent_id)


def test_unreadable_table_fails_closed_naming_the_row():
    records = three_day_records()
    records[1] = {"Description": "Restaurants in Beta", "Content": "Name Average Cost\nnothing usable here at all"}
    row = normalise_row(fixture_raw(id="garbled-3", reference_information=reference_information(records)), 3)
    with pytest.raises(RoleContextError, match="garbled-3"):
        role_catalog_lines(row, 1)
