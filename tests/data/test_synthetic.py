"""Synthetic TravelPlanner rows: layout, hub formats, sizes, and an independent check of the hidden plans."""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import require_shared_data
from travel.data.synthetic import (
    SyntheticSource,
    _choose_lodging,
    _choose_restaurants,
    feasible_plan,
    synthesize_row,
)
from travel.data.synthetic_places import PLACES
from travel.data.synthetic_tables import build_city_block

REPO_ROOT = Path(__file__).resolve().parents[2]
REAL_DATA = REPO_ROOT / ".." / "shared" / "data" / "travelplanner"
PLAN_FIELDS = ("current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")
CONSTRAINT_VALUES = {
    "room type": {"not shared room", "entire room", "private room", "shared room"},
    "house rule": {"parties", "smoking", "children under 10", "visitors", "pets"},
    "transportation": {"no flight", "no self-driving"},
}
KNOWN_CUISINES = {"American", "Chinese", "French", "Indian", "Italian", "Mediterranean", "Mexican"}
COLUMNS = {
    "Attractions": ("Name", "Latitude", "Longitude", "Address", "Phone", "Website", "City"),
    "Restaurants": ("Name", "Average Cost", "Cuisines", "Aggregate Rating", "City"),
    "Accommodations": ("NAME", "price", "room type", "house_rules", "minimum nights", "maximum occupancy",
                       "review rate number", "city"),
    "Flight": ("Flight Number", "Price", "DepTime", "ArrTime", "ActualElapsedTime", "FlightDate", "OriginCityName",
               "DestCityName", "Distance"),
}
GROUND = re.compile(r"(self-driving|taxi), from (.+) to (.+), duration: \d+ hours \d+ mins, distance: [\d,]+ km, cost: (\d+)")
FLIGHT_DESCRIPTION = re.compile(r"Flight from (.+) to (.+) on (\d{4}-\d{2}-\d{2})")


def canon(text: str) -> str:
    return " ".join(text.split()).casefold()


@pytest.fixture(scope="module")
def source():
    return SyntheticSource(seed=0, num_rows=180)


@pytest.fixture(scope="module")
def rows(source):
    return source.load_raw()


@pytest.fixture(scope="module")
def plans(source):
    return source.feasible_plans()


def real_rows(name: str = "train.jsonl") -> list[dict]:
    path = REAL_DATA / name
    require_shared_data()
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def records_of(raw: dict) -> list[dict]:
    return ast.literal_eval(raw["reference_information"])


# ----------------------------------------------------------------------------------------------
# An independent reader of the fixed-width tables: cut each line at the header names' right edges.


def table_cells(content: str, columns: tuple[str, ...]) -> list[list[str]]:
    lines = content.split("\n")
    edges, position = [], 0
    for name in columns:
        position = lines[0].index(name, position) + len(name)
        edges.append(position)
    starts = [0] + edges[:-1]
    return [[line[s:e].strip() for s, e in zip(starts, edges)] for line in lines[1:]]


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


def test_same_seed_gives_identical_rows_and_plans(rows, plans):
    for index in (0, 37, 64, 101, 142, 179):
        again = synthesize_row(0, index)
        assert again.raw == rows[index]
        assert again.plan == plans[index]


def test_rows_do_not_depend_on_the_hash_seed(rows):
    code = (
        "import hashlib, json; from travel.data.synthetic import SyntheticSource; "
        "print(hashlib.sha256(json.dumps(SyntheticSource(seed=0, num_rows=4).load_raw()).encode()).hexdigest())"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == hashlib.sha256(json.dumps(rows[:4]).encode()).hexdigest()


def test_different_seeds_give_different_rows(rows):
    other = SyntheticSource(seed=1, num_rows=180).load_raw()
    assert all(a["reference_information"] != b["reference_information"] for a, b in zip(rows, other))
    assert sum(a["query"] != b["query"] for a, b in zip(rows, other)) >= 170


def test_fewer_rows_are_a_prefix(rows):
    assert SyntheticSource(seed=0, num_rows=25).load_raw() == rows[:25]


@pytest.mark.parametrize("num_rows", [0, -1, 181, 2.5, True])
def test_bad_row_counts_are_rejected(num_rows):
    with pytest.raises(ValueError, match="num_rows"):
        SyntheticSource(seed=0, num_rows=num_rows)


def test_row_order_follows_the_validation_split(rows):
    assert len(rows) == 180
    for index, raw in enumerate(rows):
        level = ("easy", "medium", "hard")[index // 60]
        days = (3, 5, 7)[(index % 60) // 20]
        assert (raw["level"], raw["days"], raw["visiting_city_number"]) == (level, days, {3: 1, 5: 2, 7: 3}[days])
    assert [r["days"] for r in rows[:20]] == [3] * 20 and [r["days"] for r in rows[60:80]] == [3] * 20


def test_cities_dest_and_record_order(rows):
    for raw in rows:
        records = records_of(raw)
        cities = [r["Description"][len("Attractions in "):] for r in records if r["Description"].startswith("Attractions")]
        assert len(cities) == raw["visiting_city_number"] and raw["org"] not in cities
        if raw["days"] == 3:
            assert raw["dest"] == cities[0]
        else:
            assert raw["dest"] not in cities and raw["dest"] in raw["query"]
        route = [raw["org"], *cities, raw["org"]]
        dates = ast.literal_eval(raw["date"])
        expected = [f"{kind} in {city}" for city in cities for kind in ("Attractions", "Restaurants", "Accommodations")]
        for leg, (a, b) in enumerate(zip(route, route[1:])):
            expected += [f"Flight from {a} to {b} on {dates[2 * leg]}", f"Self-driving from {a} to {b}", f"Taxi from {a} to {b}"]
        assert [r["Description"] for r in records] == expected


def test_columns_and_value_types_match_the_real_rows(rows):
    real = real_rows()
    expected = [key for key in real[0] if key != "annotated_plan"]
    for raw in rows:
        assert list(raw) == expected
        for key in expected:
            assert type(raw[key]) is type(real[0][key]), key
    sample = real_rows("validation_sample_3rows.jsonl")
    assert list(sample[0]) == expected


def test_field_formats(rows):
    real = real_rows()
    real_constraint_keys = list(ast.literal_eval(real[0]["local_constraint"]))
    for raw in rows:
        dates = ast.literal_eval(raw["date"])
        assert repr(dates) == raw["date"] and len(dates) == raw["days"]
        assert all(re.fullmatch(r"2022-03-\d\d", d) for d in dates)
        assert [int(d[-2:]) for d in dates] == list(range(int(dates[0][-2:]), int(dates[0][-2:]) + raw["days"]))
        constraint = ast.literal_eval(raw["local_constraint"])
        assert repr(constraint) == raw["local_constraint"] and list(constraint) == real_constraint_keys
        records = records_of(raw)
        assert repr(records) == raw["reference_information"]
        assert all(list(r) == ["Description", "Content"] for r in records)
        assert raw["org"] in raw["query"] and raw["dest"] in raw["query"] and f"${raw['budget']:,}" in raw["query"]
        assert raw["budget"] > 0 and raw["budget"] % 100 == 0 and raw["people_number"] >= 1


def test_table_headers_match_the_real_tables(rows):
    def headers(raw_rows):
        found = {}
        for raw in raw_rows:
            for record in records_of(raw):
                kind = record["Description"].split(" ")[0]
                if kind in COLUMNS and not record["Content"].startswith("There is no"):
                    found.setdefault(kind, set()).add(" ".join(record["Content"].split("\n")[0].split()))
        return found

    real, ours = headers(real_rows()), headers(rows)
    assert set(ours) == set(COLUMNS)
    for kind in COLUMNS:
        assert len(real[kind]) == 1 and ours[kind] == real[kind], kind


def test_tables_are_exactly_what_pandas_prints(rows):
    for index in (0, 21, 45, 70, 99, 119, 125, 150, 179):
        built = synthesize_row(0, index)
        contents = {r["Description"]: r["Content"] for r in records_of(rows[index])}
        tables = [t for block in built.blocks for t in block.tables()]
        tables += [(f"Flight from {leg.origin} to {leg.destination} on {leg.date}", leg.flight_table())
                   for leg in built.legs if leg.flights]
        for description, table in tables:
            frame = pd.DataFrame(table.rows, columns=list(table.columns), index=table.index)
            assert frame.to_string(index=table.index is not None) == contents[description], description


def test_unavailable_flights_and_ground_lines_use_the_real_wording(rows):
    real_empty = [r for raw in real_rows() for r in records_of(raw) if r["Content"].startswith("There is no flight")]
    assert real_empty and all(r["Content"] == f"There is no {r['Description'][0].lower()}{r['Description'][1:]}." for r in real_empty)
    flights = [r for raw in rows for r in records_of(raw) if r["Description"].startswith("Flight")]
    empty = [r for r in flights if r["Content"].startswith("There is no flight")]
    assert 0.15 <= len(empty) / len(flights) <= 0.45
    assert all(r["Content"] == f"There is no {r['Description'][0].lower()}{r['Description'][1:]}." for r in empty)
    ground = [r["Content"] for raw in rows for r in records_of(raw) if r["Description"].startswith(("Self", "Taxi"))]
    assert all(GROUND.fullmatch(c) or c == "No valid information." for c in ground)
    assert "No valid information." in ground


def test_reference_lengths_are_realistic(rows):
    lengths = [len(raw["reference_information"]) for raw in rows]
    assert min(lengths) >= 9000 and max(lengths) <= 45000
    assert 12000 <= statistics.median(lengths) <= 35000


def test_constraints_per_level(rows):
    for raw in rows:
        constraint = ast.literal_eval(raw["local_constraint"])
        present = {key: value for key, value in constraint.items() if value is not None}
        assert len(present) == {"easy": 0, "medium": 1, "hard": 3}[raw["level"]]
        for key, value in present.items():
            if key == "cuisine":
                assert isinstance(value, list) and value and set(value) <= KNOWN_CUISINES
                assert len(set(value)) == len(value)
            else:
                assert value in CONSTRAINT_VALUES[key]
        if raw["level"] == "easy":
            assert raw["people_number"] == 1
    medium_keys = {next(k for k, v in ast.literal_eval(r["local_constraint"]).items() if v) for r in rows[60:120]}
    assert medium_keys == {"house rule", "cuisine", "room type", "transportation"}


def test_names_are_as_irregular_as_real_ones(rows):
    restaurant_names, lodging_names, duplicated_cities = [], [], 0
    for raw in rows:
        for record in records_of(raw):
            if record["Description"].startswith("Restaurants"):
                names = [re.fullmatch(r"\d+\s+(.*)", c[0]).group(1) for c in table_cells(record["Content"], COLUMNS["Restaurants"])]
                restaurant_names += names
                duplicated_cities += len({canon(n) for n in names}) < len(names)
            elif record["Description"].startswith("Accommodations"):
                lodging_names += [c[0] for c in table_cells(record["Content"], COLUMNS["Accommodations"])]
    assert duplicated_cities >= 20
    assert any(re.search(r"\d", n) for n in restaurant_names) and any("&" in n for n in restaurant_names)
    assert any("," in n for n in lodging_names) and any(re.search(r"\d", n) for n in lodging_names)


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


def test_generating_the_split_is_fast():
    start = time.process_time()
    for index in range(180):
        synthesize_row(7, index)
    assert time.process_time() - start < 2.0
