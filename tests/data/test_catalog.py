"""Reference catalog parsing on the real rows and on hand-built records, and the shared helpers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import require_shared_data
from tests.fixtures import (
    accommodations_record,
    flight_record,
    ground_record,
    restaurants_record,
    three_day_records,
)
from travel.data.catalog import (
    Catalog,
    CatalogEntry,
    CatalogParseError,
    accommodation_satisfies_house_rule,
    accommodation_satisfies_room_type,
    match_entity,
    match_transport,
    parse_reference_catalog,
    scaled_party_cost,
    split_attractions,
    transportation_satisfies_rule,
)
from travel.data.normalise import normalise_row

DATA_DIR = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "travelplanner"


@pytest.fixture(scope="module")
def real_rows():
    require_shared_data()
    rows = []
    for name, split in (("train.jsonl", "train"), ("validation_sample_3rows.jsonl", "validation")):
        for index, line in enumerate((DATA_DIR / name).read_text().splitlines()):
            rows.append(normalise_row(json.loads(line), index, split))
    assert len(rows) == 48
    return rows


@pytest.fixture(scope="module")
def train_catalogs(real_rows):
    return {row.source_index: parse_reference_catalog(row.reference_records) for row in real_rows if row.source_split == "train"}


# ------------------------------------------------------------------------ (a) counts on every real row


def _independent_counts(records) -> dict[str, int]:
    """Entries per table kind counted with plain string operations on the raw Content."""
    counts = {"restaurants": 0, "attractions": 0, "accommodations": 0, "flights": 0, "taxi": 0, "self_driving": 0}
    kinds = {"Restaurants": "restaurants", "Attractions": "attractions", "Accommodations": "accommodations",
             "Flight": "flights", "Taxi": "taxi", "Self-driving": "self_driving"}  # fmt: skip
    for record in records:
        lines = [line for line in record["Content"].split("\n") if line.strip()]
        first = lines[0].strip().lower()
        if first.startswith("no valid information") or first.startswith("there is no flight"):
            continue
        kind = kinds[record["Description"].split(" ")[0]]
        counts[kind] += 1 if kind in ("taxi", "self_driving") else len(lines) - 1
    return counts


def test_every_real_row_parses_to_the_independent_counts(real_rows) -> None:
    for row in real_rows:
        catalog = parse_reference_catalog(row.reference_records)
        assert catalog.counts() == _independent_counts(row.reference_records), row.id
        assert catalog.record_count == len(row.reference_records)
        assert catalog.parse_success, row.id


def test_venue_entries_carry_the_city_of_their_record(real_rows) -> None:
    for row in real_rows:
        catalog = parse_reference_catalog(row.reference_records)
        for record in row.reference_records:
            kind, _, city = record["Description"].partition(" in ")
            if kind in ("Restaurants", "Attractions", "Accommodations"):
                entries = {"Restaurants": catalog.restaurants, "Attractions": catalog.attractions,
                           "Accommodations": catalog.accommodations}[kind]  # fmt: skip
                in_city = [e for e in entries if e.city == city]
                assert len(in_city) == len(record["Content"].strip().split("\n")) - 1, (row.id, record["Description"])


def test_parsing_all_real_rows_is_fast(real_rows) -> None:
    start = time.perf_counter()
    for row in real_rows:
        parse_reference_catalog(row.reference_records)
    assert time.perf_counter() - start < 1.0


def test_row_catalog_property_parses_the_row(real_rows) -> None:
    row = real_rows[20]
    assert isinstance(row.catalog, Catalog) and row.catalog is row.catalog
    assert row.catalog.counts()["flights"] == 10


# ------------------------------------------------------------------------ (b) spot checks read by eye


def _one(entries, name: str) -> CatalogEntry:
    found = [e for e in entries if e.name == name]
    assert len(found) == 1, (name, found)
    return found[0]


def test_row_20_values_read_from_the_raw_file(train_catalogs) -> None:
    catalog = train_catalogs[20]
    red_ginger = _one(catalog.restaurants, "Red Ginger Sushi, Grill & Bar")
    assert (red_ginger.city, red_ginger.cost) == ("Philadelphia", 98.0)
    assert red_ginger.cuisines == ("Tea", "Cafe", "Indian", "Fast Food")
    beijing = _one(catalog.restaurants, "Beijing Cafe")  # its line starts with the index "522"
    assert (beijing.city, beijing.cost) == ("Pittsburgh", 33.0)
    clean = _one(catalog.accommodations, "Clean")
    assert (clean.city, clean.cost, clean.room_type, clean.house_rules, clean.minimum_nights, clean.maximum_occupancy) == (
        "Pittsburgh", 720.0, "Private room", "No visitors & No parties & No smoking", 3.0, 1.0,
    )
    bushwick = _one(catalog.accommodations, "Beautiful room at the heart of Bushwick")
    assert (bushwick.cost, bushwick.room_type, bushwick.minimum_nights) == (250.0, "Shared room", 30.0)
    four_bedroom = _one(catalog.accommodations, "New Designer 4 Bedroom, AC-Laundry. Next to Subway")
    assert (four_bedroom.cost, four_bedroom.maximum_occupancy) == (1192.0, 4.0)
    flight = _one(catalog.flights, "F4055528")
    assert (flight.cost, flight.origin, flight.destination, flight.date) == (92.0, "Pittsburgh", "Philadelphia", "2022-03-14")
    drive = [e for e in catalog.self_driving if (e.origin, e.destination) == ("Philadelphia", "Nashville")]
    assert [(e.name, e.cost, e.date) for e in drive] == [("self-driving", 64.0, "")]
    taxi = [e for e in catalog.taxi if (e.origin, e.destination) == ("Philadelphia", "Nashville")]
    assert [e.cost for e in taxi] == [1294.0]  # the line also says "distance: 1,294 km"
    assert _one(catalog.attractions, "Phipps Conservatory and Botanical Gardens").cost == 0.0


def test_names_with_digits_commas_symbols_and_space_runs_parse_whole(train_catalogs) -> None:
    pensacola = _one(train_catalogs[1].restaurants, "Mouthmatics")  # raw cell "Mouthmatics " (trailing blank)
    assert (pensacola.cost, pensacola.cuisines) == (56.0, ("Mexican", "BBQ", "Desserts"))
    guesthouse = _one(train_catalogs[1].accommodations, "1D  Private Rm  in Guesthouse Manhattan")
    assert (guesthouse.cost, guesthouse.house_rules, guesthouse.city) == (378.0, "No visitors & No parties", "Pensacola")
    dollars = _one(train_catalogs[25].accommodations, "$2,800")
    assert (dollars.cost, dollars.minimum_nights, dollars.maximum_occupancy, dollars.city) == (563.0, 14.0, 3.0, "Lubbock")
    penthouse = _one(train_catalogs[33].accommodations, "1,100 sq. ft. apt. Penthouse with private deck!")
    assert (penthouse.cost, penthouse.house_rules, penthouse.city) == (209.0, "No visitors & No pets", "Phoenix")
    great = _one(train_catalogs[30].accommodations, "3 B   GREAT 1BR APT IN NEW YORK CITY")
    assert (great.cost, great.minimum_nights, great.city) == (135.0, 30.0, "Fayetteville")
    angie = _one(train_catalogs[28].accommodations, "Angie Suite  in the Heights\\nSe habla Español")
    assert (angie.cost, angie.house_rules, angie.city) == (217.0, "No pets", "Kalamazoo")


def test_validation_restaurants_without_an_index_column(real_rows) -> None:
    dallas = parse_reference_catalog(real_rows[46].reference_records)
    bistro = _one(dallas.restaurants, "1918 Bistro & Grill")
    assert (bistro.cost, bistro.city, bistro.cuisines) == (90.0, "Dallas", ("Tea", "Pizza", "BBQ", "Seafood"))
    downtown = _one(dallas.restaurants, "Downtown Kitchen & Bar - Courtyard by Marriott")
    assert (downtown.cost, downtown.city) == (87.0, "El Paso")


# --------------------------------------------------------- (c) empty tables still define dated routes


def test_no_flight_contents_give_no_entries_but_keep_their_dated_route(train_catalogs, real_rows) -> None:
    catalog = train_catalogs[1]
    assert catalog.flights == ()
    assert ("2022-03-27", "Kansas City", "Pensacola") in catalog.dated_routes
    assert ("2022-03-29", "Pensacola", "Kansas City") in catalog.dated_routes
    for row in real_rows:
        flight_descriptions = [r["Description"] for r in row.reference_records if r["Description"].startswith("Flight")]
        routes = parse_reference_catalog(row.reference_records).dated_routes
        assert [f"Flight from {o} to {d} on {date}" for date, o, d in routes] == flight_descriptions


def test_no_valid_information_in_any_case_gives_empty_tables() -> None:
    records = [
        {"Description": "Restaurants in Beta", "Content": "NO VALID INFORMATION."},
        {"Description": "accommodations in Beta", "Content": "\n  No valid information\n"},
        {"Description": "Flight from Alpha to Beta on 2022-01-01", "Content": "no valid information."},
        ground_record("Self-driving", "Alpha", "Beta"),
        ground_record("Taxi", "Alpha", "Beta", 7),
        flight_record("Beta", "Alpha", "2022-01-03", []),
    ]
    catalog = parse_reference_catalog(records)
    assert (catalog.restaurants, catalog.accommodations, catalog.flights, catalog.self_driving) == ((), (), (), ())
    assert [(e.mode, e.cost) for e in catalog.taxi] == [("taxi", 7.0)]
    assert catalog.dated_routes == (("2022-01-01", "Alpha", "Beta"), ("2022-01-03", "Beta", "Alpha"))
    # Counted: the taxi entry plus the two transport records saying "no valid information".
    assert (catalog.parsed_record_count, catalog.record_count) == (3, 6)
    assert not catalog.parse_success


def test_fixture_catalog_counts_and_allowed_cities() -> None:
    catalog = parse_reference_catalog(tuple(three_day_records()))
    assert catalog.counts() == {"restaurants": 4, "attractions": 2, "accommodations": 2, "flights": 2, "taxi": 0,
                                "self_driving": 0}  # fmt: skip
    assert catalog.allowed_cities == frozenset({"alpha", "beta"})
    assert catalog.parsed_record_count == catalog.record_count == 3 + 2 * 3  # venues + (flight, drive, taxi) per leg


def test_ground_descriptions_with_a_date_and_dollar_costs() -> None:
    records = [
        {"Description": "Taxi from Alpha to Beta on 2022-01-01",
         "Content": "taxi, from Alpha to Beta, duration: 1 hour, distance: 1,200 km, cost: $1,200"},
    ]  # fmt: skip
    (taxi,) = parse_reference_catalog(records).taxi
    assert (taxi.name, taxi.cost, taxi.origin, taxi.destination, taxi.date) == ("taxi", 1200.0, "Alpha", "Beta", "")


# --------------------------------------------------------------------------- (d) malformed records


def _bad(records, *fragments: str) -> None:
    with pytest.raises(CatalogParseError) as caught:
        parse_reference_catalog(records)
    for fragment in fragments:
        assert fragment in str(caught.value), (fragment, str(caught.value))


def test_unknown_description_names_the_record() -> None:
    records = [ground_record("Taxi", "A", "B", 5), {"Description": "Museums in Beta", "Content": "x"}]
    _bad(records, "record 1", "'Museums in Beta'", "unknown Description")


def test_non_numeric_price_names_the_record_and_line() -> None:
    record = accommodations_record("Beta", [("Hotel", 100, "Private room", "No parties", 1, 2)])
    record["Content"] = record["Content"].replace("100.0", "cheap")  # same width, so the layout still fits
    _bad([record], "record 0", "'Accommodations in Beta'", "'price'", "cheap", "Hotel")


def test_misaligned_line_names_the_record_and_line() -> None:
    record = restaurants_record("Beta", [("Cafe", 10, "Indian"), ("Diner", 15, "American")])
    lines = record["Content"].split("\n")
    assert "15 " in lines[2]
    lines[2] = lines[2].replace("15 ", "150")  # a cost one character wider than its column covers the separator
    record["Content"] = "\n".join(lines)
    _bad([ground_record("Taxi", "A", "B", 5), record], "record 1", "'Restaurants in Beta'", "Diner")


def test_city_column_must_match_the_description() -> None:
    record = restaurants_record("Beta", [("Cafe", 10, "Indian")])
    record["Description"] = "Restaurants in Gamma"
    _bad([record], "record 0", "'Restaurants in Gamma'", "'Beta'")


def test_flight_rows_must_match_their_description() -> None:
    record = flight_record("Alpha", "Beta", "2022-01-01", [("F100", 20)])
    record["Description"] = "Flight from Alpha to Beta on 2022-01-02"
    _bad([record], "record 0", "2022-01-02", "F100")


def test_ground_record_without_cost_and_record_without_content() -> None:
    line = "taxi, from Alpha to Beta, duration: 1 hour, distance: 10 km"
    _bad([{"Description": "Taxi from Alpha to Beta", "Content": line}], "record 0", "cost", line)
    _bad([{"Description": "Taxi from Alpha to Beta", "Content": "taxi, from A to B, cost: lots"}], "record 0")
    _bad([{"Description": "Taxi from Alpha to Beta"}], "record 0")
    _bad([{"Description": "Restaurants in Beta", "Content": "Name City\n  x Beta"}], "record 0", "header")


# ------------------------------------------------------------------------------------- (e) helpers


def _venue(category: str, name: str, city: str = "Beta", cost: float | None = 10.0, **fields) -> CatalogEntry:
    return CatalogEntry(category=category, name=name, city=city, cost=cost, **fields)


def _ride(mode: str, cost: float, origin: str = "Alpha", destination: str = "Beta", name: str | None = None) -> CatalogEntry:
    date = "2022-01-01" if mode == "flight" else ""
    return CatalogEntry("transportation", name or mode, cost=cost, mode=mode, origin=origin, destination=destination, date=date)


@pytest.mark.parametrize("people", [1, 2, 3, 4, 5, 6])
def test_party_costs(people: int) -> None:
    vehicles_4 = {1: 1, 2: 1, 3: 1, 4: 1, 5: 2, 6: 2}[people]
    vehicles_5 = {1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 2}[people]
    rooms_of_3 = {1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 2}[people]
    assert scaled_party_cost(_ride("flight", 100.0, name="F1"), people) == 100.0 * people
    assert scaled_party_cost(_ride("taxi", 30.0), people) == 30.0 * vehicles_4
    assert scaled_party_cost(_ride("self-driving", 20.0), people) == 20.0 * vehicles_5
    assert scaled_party_cost(_venue("restaurant", "Cafe", cost=12.0), people) == 12.0 * people
    assert scaled_party_cost(_venue("accommodation", "Inn", cost=90.0, maximum_occupancy=3.0), people) == 90.0 * rooms_of_3
    assert scaled_party_cost(_venue("accommodation", "Hut", cost=50.0, maximum_occupancy=0.0), people) == 50.0 * people
    assert scaled_party_cost(_venue("attraction", "Museum", cost=0.0), people) == 0.0


def test_party_cost_edge_cases() -> None:
    assert scaled_party_cost(_venue("restaurant", "Cafe", cost=None), 3) is None
    assert scaled_party_cost(_venue("restaurant", "Cafe", cost=12.0), 0) == 12.0  # people floored at 1
    with pytest.raises(ValueError):
        scaled_party_cost(_ride("boat", 5.0), 1)


def test_room_type_rules() -> None:
    shared, private, entire = (_venue("accommodation", n, room_type=t) for n, t in
                               (("S", "Shared room"), ("P", "Private room"), ("E", "Entire home/apt")))  # fmt: skip
    assert [accommodation_satisfies_room_type(e, "not shared room") for e in (shared, private, entire)] == [False, True, True]
    assert [accommodation_satisfies_room_type(e, "entire room") for e in (shared, private, entire)] == [False, False, True]
    assert [accommodation_satisfies_room_type(e, "Private  Room") for e in (shared, private, entire)] == [False, True, False]
    assert all(accommodation_satisfies_room_type(e, req) for e in (shared, private) for req in (None, "", "-"))


def test_house_rules() -> None:
    strict = _venue("accommodation", "Inn", house_rules="No visitors & No parties")
    relaxed = _venue("accommodation", "Loft", house_rules="No smoking")
    assert not accommodation_satisfies_house_rule(strict, "parties")
    assert accommodation_satisfies_house_rule(relaxed, "parties")
    assert not accommodation_satisfies_house_rule(strict, "Visitors")
    assert accommodation_satisfies_house_rule(strict, None) and accommodation_satisfies_house_rule(strict, "")


def test_transportation_rules() -> None:
    flight, drive, taxi = _ride("flight", 1.0, name="F1"), _ride("self-driving", 1.0), _ride("taxi", 1.0)
    assert [transportation_satisfies_rule(e, "no flight") for e in (flight, drive, taxi)] == [False, True, True]
    assert [transportation_satisfies_rule(e, "No Self-Driving") for e in (flight, drive, taxi)] == [True, False, True]
    assert [transportation_satisfies_rule(e, "no taxi") for e in (flight, drive, taxi)] == [False, False, False]
    assert all(transportation_satisfies_rule(e, None) for e in (flight, drive, taxi))


def test_match_entity_first_duplicate_wins_and_last_comma_splits() -> None:
    first = _venue("restaurant", "Burger King", cost=98.0)
    second = _venue("restaurant", "Burger King", cost=13.0)
    comma = _venue("restaurant", "Red Ginger Sushi, Grill & Bar", city="Philadelphia", cost=98.0)
    entries = (first, second, comma)
    assert match_entity("Burger King, Beta", entries) is first
    assert match_entity("  burger   KING ,beta ", entries) is first
    assert match_entity("Red Ginger Sushi, Grill & Bar, Philadelphia", entries) is comma
    for value in ("Burger King", "Burger King, Gamma", ", Beta", "Burger King, ", "-", None):
        assert match_entity(value, entries) is None, value
    mixed = (first, CatalogEntry("attraction", "Burger King", city="Beta", cost=0.0))
    assert match_entity("Burger King, Beta", mixed) is None


def test_split_attractions() -> None:
    assert split_attractions(" Museum, Beta ;; Park, Beta; ") == ["Museum, Beta", "Park, Beta"]
    assert split_attractions("") == [] and split_attractions(None) == []


def test_match_transport_requires_a_full_match() -> None:
    catalog = parse_reference_catalog(
        [
            flight_record("Alpha", "Beta", "2022-01-01", [("F100", 20), ("F101", 30)]),
            ground_record("Self-driving", "Alpha", "Beta", 5),
            ground_record("Taxi", "New York", "Beta", 9),
        ]
    )
    f100 = match_transport("Flight Number: F100, from Alpha to Beta", catalog)
    assert f100 is not None and (f100.name, f100.cost) == ("F100", 20.0)
    assert match_transport("flight number:F101 ,  from alpha  to  BETA ", catalog).cost == 30.0
    assert match_transport("Self-driving, from Alpha to Beta", catalog).cost == 5.0
    assert match_transport("taxi, from New York to Beta", catalog).cost == 9.0
    for value in (
        "Flight Number: F100, from Alpha to Beta, 10:00",
        "Take Flight Number: F100, from Alpha to Beta",
        "Flight Number: F100, from Beta to Alpha",
        "Flight Number: F999, from Alpha to Beta",
        "Flight Number: F100",
        "F100",
        "Taxi, from Alpha to Beta",
        "Self-driving from Alpha to Beta",
        "Self-driving, from Alpha to Beta (2 hours)",
    ):
        assert match_transport(value, catalog) is None, value


def test_match_transport_rejects_ambiguous_flights() -> None:
    record = flight_record("Alpha", "Beta", "2022-01-01", [("F100", 20), ("F100", 25)])
    assert match_transport("Flight Number: F100, from Alpha to Beta", parse_reference_catalog([record])) is None
    repeated = parse_reference_catalog([flight_record("Alpha", "Beta", "2022-01-01", [("F100", 20)])] * 2)
    assert match_transport("Flight Number: F100, from Alpha to Beta", repeated).cost == 20.0
