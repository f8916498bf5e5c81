"""Synthetic TravelPlanner hidden plans: an independent check of every feasible plan, the generator's fixes for
cities without an admissible choice, and the catalog parser on every row."""

from __future__ import annotations

import ast
import math
import random
import re

import pytest

from tests.data.test_synthetic import (  # noqa: F401  (plans, rows, source: fixtures, used by name)
    COLUMNS,
    GROUND,
    canon,
    plans,
    records_of,
    rows,
    source,
    table_cells,
)
from travel.data.synthetic import SyntheticSource, _choose_lodging, _choose_restaurants, feasible_plan, synthesize_row
from travel.data.synthetic_places import PLACES
from travel.data.synthetic_tables import build_city_block

PLAN_FIELDS = ("current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")
FLIGHT_DESCRIPTION = re.compile(r"Flight from (.+) to (.+) on (\d{4}-\d{2}-\d{2})")


# ----------------------------------------------------------------------------------------------
# The independent plan check, on the tables as read by table_cells.


def read_tables(raw: dict) -> dict:
    """Everything the plan check needs, first row per (name, city) winning, as the evaluator reads it."""
    world = {"restaurants": {}, "attractions": {}, "lodgings": {}, "flights": {}, "ground": {}, "routes": [],
             "line_counts": {"restaurants": 0, "attractions": 0, "accommodations": 0, "flights": 0, "taxi": 0,
                             "self_driving": 0}}
    for record in records_of(raw):
        description, content = record["Description"], record["Content"]
        kind = description.split(" ")[0]
        if kind == "Restaurants":
            city = description[len("Restaurants in "):]
            table = world["restaurants"].setdefault(city, {})
            for cells in table_cells(content, COLUMNS[kind]):
                index, name = re.fullmatch(r"(\d+)\s+(.*)", cells[0]).groups()
                assert cells[4] == city
                table.setdefault(canon(name), (int(cells[1]), {canon(c) for c in cells[2].split(",")}))
                world["line_counts"]["restaurants"] += 1
        elif kind == "Attractions":
            city = description[len("Attractions in "):]
            cells_list = table_cells(content, COLUMNS[kind])
            world["attractions"][city] = {canon(cells[0]) for cells in cells_list}
            world["line_counts"]["attractions"] += len(cells_list)
        elif kind == "Accommodations":
            city = description[len("Accommodations in "):]
            table = world["lodgings"].setdefault(city, {})
            for cells in table_cells(content, COLUMNS[kind]):
                table.setdefault(canon(cells[0]), {"price": float(cells[1]), "room": cells[2], "rules": cells[3],
                                                   "min_nights": float(cells[4]), "occupancy": int(cells[5])})
                world["line_counts"]["accommodations"] += 1
        elif kind == "Flight":
            origin, destination, date = FLIGHT_DESCRIPTION.fullmatch(description).groups()
            world["routes"].append((date, origin, destination))
            flights = world["flights"].setdefault((origin, destination, date), {})
            if content.startswith("There is no flight"):
                assert content == f"There is no flight from {origin} to {destination} on {date}."
                continue
            for cells in table_cells(content, COLUMNS[kind]):
                assert (cells[5], cells[6], cells[7]) == (date, origin, destination)
                flights[cells[0]] = int(cells[1])
                world["line_counts"]["flights"] += 1
        else:
            mode = kind.casefold()
            origin, destination = re.fullmatch(r"\S+ from (.+) to (.+)", description).groups()
            if content == "No valid information.":
                world["ground"][(mode, origin, destination)] = None
                continue
            match = GROUND.fullmatch(content)
            assert match and match.group(1) == mode and match.groups()[1:3] == (origin, destination)
            world["ground"][(mode, origin, destination)] = int(match.group(4))
            world["line_counts"]["taxi" if mode == "taxi" else "self_driving"] += 1
    return world


def split_entity(value: str) -> tuple[str, str]:
    name, city = value.rsplit(",", 1)
    return canon(name), city.strip()


def room_ok(room: str, request) -> bool:
    return {None: True, "not shared room": room != "Shared room", "entire room": room == "Entire home/apt",
            "private room": room == "Private room", "shared room": room == "Shared room"}[request]


def check_plan(raw: dict, plan: list[dict]) -> float:
    """Everything the evaluator checks, re-derived from the raw text; returns the plan's cost.

    Raises AssertionError naming the problem."""
    world = read_tables(raw)
    dates = ast.literal_eval(raw["date"])
    constraint = ast.literal_eval(raw["local_constraint"])
    people, days = raw["people_number"], raw["days"]
    assert len(plan) == days and all(tuple(day) == PLAN_FIELDS for day in plan)

    cost, current, modes, cuisines = 0.0, raw["org"], set(), set()
    meals_seen, attractions_seen, lodging_runs, visited = set(), set(), [], []
    for day, entry in enumerate(plan, start=1):
        routes = [r for r in world["routes"] if r[0] == dates[day - 1]]
        if routes:
            assert len(routes) == 1, f"day {day}: several dated routes"
            _, origin, destination = routes[0]
            assert origin == current and entry["current_city"] == f"from {origin} to {destination}"
            flight = re.fullmatch(r"Flight Number: (F\d+), from (.+) to (.+)", entry["transportation"])
            ground = re.fullmatch(r"(Self-driving|Taxi), from (.+) to (.+)", entry["transportation"])
            assert flight or ground, f"day {day}: transportation {entry['transportation']!r}"
            if flight:
                assert flight.groups()[1:] == (origin, destination)
                cost += world["flights"][(origin, destination, dates[day - 1])][flight.group(1)] * people
                modes.add("flight")
            else:
                mode = ground.group(1).casefold()
                assert ground.groups()[1:] == (origin, destination)
                unit = world["ground"][(mode, origin, destination)]
                assert unit is not None, f"day {day}: {mode} has no valid information"
                cost += unit * math.ceil(people / (4 if mode == "taxi" else 5))
                modes.add(mode)
            assert all(entry[f] == "-" for f in ("breakfast", "attraction", "lunch", "dinner"))
            current = destination
            visited.append(destination)
        else:
            assert entry["current_city"] == current and entry["transportation"] == "-"
            for meal in ("breakfast", "lunch", "dinner"):
                name, city = split_entity(entry[meal])
                assert city == current, f"day {day}: {meal} in {city}, not {current}"
                price, offered = world["restaurants"][city][name]
                cost += price * people
                cuisines |= offered
                assert (name, city) not in meals_seen, f"day {day}: {meal} repeats a restaurant"
                meals_seen.add((name, city))
            assert ";" not in entry["attraction"]
            name, city = split_entity(entry["attraction"])
            assert city == current and name in world["attractions"][city]
            assert (name, city) not in attractions_seen
            attractions_seen.add((name, city))
        if day < days:
            name, city = split_entity(entry["accommodation"])
            assert city == current, f"day {day}: lodging in {city}, the day ends in {current}"
            lodging = world["lodgings"][city][name]
            cost += lodging["price"] * math.ceil(people / max(1, lodging["occupancy"]))
            assert room_ok(lodging["room"], constraint["room type"])
            if constraint["house rule"]:
                assert f"no {constraint['house rule']}" not in canon(lodging["rules"])
            if lodging_runs and lodging_runs[-1][0] == (name, city):
                lodging_runs[-1][1] += 1
            else:
                lodging_runs.append([(name, city), 1, lodging["min_nights"]])
        else:
            assert entry["accommodation"] == "-"

    assert current == raw["org"], "the trip does not return to the origin"
    assert len(set(visited) - {raw["org"]}) == raw["visiting_city_number"]
    assert all(nights >= minimum for _, nights, minimum in lodging_runs)
    assert not ("self-driving" in modes and modes & {"flight", "taxi"})
    assert constraint["transportation"] != "no flight" or "flight" not in modes
    assert constraint["transportation"] != "no self-driving" or "self-driving" not in modes
    assert {canon(c) for c in constraint["cuisine"] or []} <= cuisines
    assert cost < raw["budget"], f"plan costs {cost}, budget {raw['budget']}"
    return cost


# ----------------------------------------------------------------------------------------------


def test_every_feasible_plan_passes_an_independent_check(rows, plans):
    assert len(plans) == len(rows)
    for index, (raw, plan) in enumerate(zip(rows, plans)):
        try:
            check_plan(raw, plan)
        except (AssertionError, KeyError) as error:
            pytest.fail(f"row {index}: {error!r}")


def test_the_generator_prices_its_plan_like_the_tables_read(rows, plans):
    for index in (3, 44, 88, 133, 178):
        assert synthesize_row(0, index).plan_cost == pytest.approx(check_plan(rows[index], plans[index]))


def test_a_missing_requested_cuisine_is_added_to_a_chosen_restaurant():
    block = build_city_block(random.Random(3), PLACES["Dallas"])
    for restaurant in block.restaurants:
        restaurant.cuisines = [c for c in restaurant.cuisines if c not in ("Mexican", "French")] or ["Tea"]
    [picked] = _choose_restaurants(random.Random(4), [block], ["Mexican", "French"])
    assert len({id(r) for r in picked}) == 3 and all(r.owns_identity for r in picked)
    assert {"Mexican", "French"} <= {c for r in picked for c in r.cuisines}
    table = block.records()[1]["Content"]
    assert "Mexican" in table and "French" in table


def test_a_city_without_an_admissible_lodging_gets_one():
    block = build_city_block(random.Random(5), PLACES["Denver"])
    for lodging in block.lodgings:
        lodging.room_type, lodging.house_rules, lodging.minimum_nights = "Shared room", "No pets & No smoking", 30.0
    constraint = {"room type": "entire room", "house rule": "pets", "cuisine": None, "transportation": None}
    chosen = _choose_lodging(random.Random(6), block, constraint, people=3)
    assert chosen in block.lodgings
    assert chosen.room_type == "Entire home/apt" and "no pets" not in chosen.house_rules.casefold()
    assert chosen.house_rules and chosen.minimum_nights <= 2


def test_the_plan_check_rejects_broken_plans(rows, plans):
    raw, plan = rows[130], [dict(day) for day in plans[130]]
    check_plan(raw, plan)
    cheap = dict(raw, budget=100)
    with pytest.raises(AssertionError, match="budget"):
        check_plan(cheap, plan)
    repeated = [dict(day) for day in plan]
    repeated[1]["lunch"] = repeated[1]["breakfast"]
    with pytest.raises(AssertionError, match="repeats"):
        check_plan(raw, repeated)


def test_plans_stay_out_of_the_rows(rows, plans):
    for raw, plan in zip(rows, plans):
        assert "annotated_plan" not in raw and len(raw) == 11
        assert feasible_plan(raw) == plan
    with pytest.raises(KeyError, match="not produced"):
        feasible_plan(dict(rows[0], query="a different request"))


def test_every_row_parses_with_the_catalog_parser(rows, plans):
    from travel.data.catalog import (
        match_entity,
        match_transport,
        parse_reference_catalog,
        scaled_party_cost,
    )

    for index, (raw, plan) in enumerate(zip(rows, plans)):
        catalog = parse_reference_catalog(records_of(raw))
        assert catalog.counts() == read_tables(raw)["line_counts"], f"row {index}"
        world = read_tables(raw)
        for day in plan:
            for field in ("breakfast", "lunch", "dinner"):
                if day[field] != "-":
                    name, city = split_entity(day[field])
                    entry = match_entity(day[field], catalog.restaurants)
                    assert entry is not None and entry.cost == world["restaurants"][city][name][0], (index, day[field])
            if day["accommodation"] != "-":
                name, city = split_entity(day["accommodation"])
                entry = match_entity(day["accommodation"], catalog.accommodations)
                assert entry is not None and entry.cost == world["lodgings"][city][name]["price"]
            if day["transportation"] != "-":
                entry = match_transport(day["transportation"], catalog)
                assert entry is not None and scaled_party_cost(entry, raw["people_number"]) is not None


def test_short_tables_keep_the_plan_and_every_other_column(rows, plans):
    """`table_rows` cuts each table to its first entries plus the plan's own: the same request, budget and plan,
    which still passes the independent check on the short tables."""
    table_rows = 2
    short = SyntheticSource(seed=0, num_rows=180, table_rows=table_rows)
    assert short.feasible_plans() == plans
    planned = {"restaurants": 3, "attractions": 1, "lodgings": 1}
    for index, (raw, cut) in enumerate(zip(rows, short.load_raw())):
        assert {k: v for k, v in cut.items() if k != "reference_information"} == {
            k: v for k, v in raw.items() if k != "reference_information"
        }
        assert len(cut["reference_information"]) < len(raw["reference_information"]), index
        try:
            check_plan(cut, plans[index])
        except (AssertionError, KeyError) as error:
            pytest.fail(f"row {index}: {error!r}")
        full, kept = read_tables(raw), read_tables(cut)
        for kind, own in planned.items():
            for city, entries in kept[kind].items():
                assert len(entries) <= table_rows + own, (index, kind, city)
                assert len(entries) >= min(table_rows, len(full[kind][city])), (index, kind, city)
                if isinstance(entries, dict):
                    assert all(full[kind][city][name] == value for name, value in entries.items()), (index, kind)
                else:
                    assert entries <= full[kind][city], (index, kind, city)
        for route, flights in kept["flights"].items():
            assert len(flights) <= table_rows + 1 and flights.items() <= full["flights"][route].items(), (index, route)


@pytest.mark.parametrize("table_rows", [0, -3, 2.5, True, "4"])
def test_bad_table_lengths_are_rejected(table_rows):
    with pytest.raises(ValueError, match="table_rows"):
        SyntheticSource(seed=0, num_rows=3, table_rows=table_rows)
