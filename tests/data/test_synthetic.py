"""Synthetic TravelPlanner rows: determinism, layout, hub formats and sizes, against the real rows where present."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import require_shared_data
from travel.data.synthetic import SyntheticSource, synthesize_row

REPO_ROOT = Path(__file__).resolve().parents[2]
REAL_DATA = REPO_ROOT / ".." / "shared" / "data" / "travelplanner"
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


def test_generating_the_split_is_fast():
    start = time.process_time()
    for index in range(180):
        synthesize_row(7, index)
    assert time.process_time() - start < 2.0
