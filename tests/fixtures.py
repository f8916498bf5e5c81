"""Hand-built TravelPlanner rows in the hub's format, and the canonical plans and actions for them.

Reference tables are rendered with pandas `DataFrame.to_string` exactly as the hub's rows are
(restaurants keep the unnamed index column; attractions, accommodations and flights do not), and the
records are ordered as the hub orders them: per visited city Attractions, Restaurants,
Accommodations; then per route leg Flight, Self-driving, Taxi.

3-day fixture (`fixture_raw` / `fixture_row`): Alpha -> Beta -> Alpha, 2022-01-01..2022-01-03,
1 person, budget 1000, easy.
    attractions    Museum, Park (Beta)
    restaurants    Cafe 10 Indian, Diner 15 American, Bistro 20 Italian, Brunch 12 French (Beta)
    accommodations Hotel 100 Private room "No parties" min 1 occ 2,
                   Motel 80 Entire home/apt "No smoking" min 1 occ 4 (Beta)
    flights        F100 20 on 2022-01-01 Alpha->Beta, F200 25 on 2022-01-03 Beta->Alpha
    ground         Self-driving / Taxi records of both legs say "No valid information."
Its valid plan costs 20 + 25 flights + 2 x 100 Hotel + 10 + 15 + 20 meals = 290.

5-day fixture (`five_day_fixture_raw` / `five_day_fixture_row`): Alpha -> Beta -> Gamma -> Alpha,
2022-01-01..2022-01-05, 1 person, budget 1500, easy, 2 visited cities.
    Beta and Gamma each  Museum (attraction); Cafe 10 Indian, Diner 15 American, Bistro 20 Italian;
                         Hotel 100 Private room "No parties" min 1 occ 2
    flights        F100 20 on 2022-01-01 Alpha->Beta, F200 30 on 2022-01-03 Beta->Gamma,
                   F300 25 on 2022-01-05 Gamma->Alpha
    ground         route legs' Self-driving / Taxi say "No valid information."; after them two extra
                   records Taxi from Gamma to Beta (cost 5) and Taxi from Beta to Alpha (cost 5)
Its valid plan costs 20 + 30 + 25 flights + 4 x 100 Hotel + 2 x 45 meals = 565.

`duplicate_name_raw`: the 3-day fixture with cuisine constraint ["Indian"] (level medium) whose Beta
restaurants are Burger King 98 Pizza, Burger King 13 Indian, Cafe 20 Indian, Diner 15 American
(docs/task.md "Budget contract": the first Burger King row owns the value, so the experience floor is 98+20+15).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import pandas as pd

from travel.data.normalise import normalise_row
from travel.data.row import TravelRow
from travel.task.fields import PLAN_FIELDS, owned_slots

NO_VALID_INFORMATION = "No valid information."
_EMPTY_CONSTRAINT = {"house rule": None, "cuisine": None, "room type": None, "transportation": None}


# ---- record builders (usable by tests that need a variant catalog) -----------------------------


def _record(description: str, frame: pd.DataFrame, index: bool = False) -> dict[str, str]:
    return {"Description": description, "Content": frame.to_string(index=index)}


def attractions_record(city: str, names: Sequence[str]) -> dict[str, str]:
    rows = [
        {
            "Name": name,
            "Latitude": 40.1 + 0.011 * position,
            "Longitude": -75.2 - 0.013 * position,
            "Address": f"{position + 1} Main St, {city}, ZZ 0000{position}, USA",
            "Phone": f"(555) 010-00{position:02d}",
            "Website": f"http://{name.casefold().replace(' ', '')}.example.org/",
            "City": city,
        }
        for position, name in enumerate(names)
    ]
    return _record(f"Attractions in {city}", pd.DataFrame(rows))


def restaurants_record(city: str, rows: Sequence[tuple[str, int, str]]) -> dict[str, str]:
    """rows: (name, average cost, cuisines "A, B"). Keeps an unnamed index column as the hub does."""
    frame = pd.DataFrame(
        [
            {"Name": name, "Average Cost": cost, "Cuisines": cuisines, "Aggregate Rating": 4.0 + 0.1 * i, "City": city}
            for i, (name, cost, cuisines) in enumerate(rows)
        ],
        index=[37 + 211 * i for i in range(len(rows))],
    )
    return _record(f"Restaurants in {city}", frame, index=True)


def accommodations_record(city: str, rows: Sequence[tuple[str, float, str, str, float, int]]) -> dict[str, str]:
    """rows: (name, price per night, room type, house rules, minimum nights, maximum occupancy)."""
    frame = pd.DataFrame(
        [
            {
                "NAME": name,
                "price": float(price),
                "room type": room_type,
                "house_rules": rules,
                "minimum nights": float(min_nights),
                "maximum occupancy": int(occupancy),
                "review rate number": 4.0,
                "city": city,
            }
            for name, price, room_type, rules, min_nights, occupancy in rows
        ]
    )
    return _record(f"Accommodations in {city}", frame)


def flight_record(origin: str, destination: str, date: str, flights: Sequence[tuple[str, int]]) -> dict[str, str]:
    """flights: (flight number, price). An empty list gives the hub's "There is no flight" text."""
    description = f"Flight from {origin} to {destination} on {date}"
    if not flights:
        return {"Description": description, "Content": f"There is no flight from {origin} to {destination} on {date}."}
    frame = pd.DataFrame(
        [
            {
                "Flight Number": number,
                "Price": price,
                "DepTime": "08:15",
                "ArrTime": "10:05",
                "ActualElapsedTime": "1 hours 50 minutes",
                "FlightDate": date,
                "OriginCityName": origin,
                "DestCityName": destination,
                "Distance": 750.0,
            }
            for number, price in flights
        ]
    )
    return _record(description, frame)


def ground_record(mode: str, origin: str, destination: str, cost: int | None = None) -> dict[str, str]:
    """mode: "Self-driving" or "Taxi"; cost None gives the hub's "No valid information." content."""
    description = f"{mode} from {origin} to {destination}"
    if cost is None:
        return {"Description": description, "Content": NO_VALID_INFORMATION}
    content = f"{mode.casefold()}, from {origin} to {destination}, duration: 1 hour 30 mins, distance: 120 km, cost: {cost}"
    return {"Description": description, "Content": content}


def reference_information(records: Sequence[Mapping[str, str]]) -> str:
    """The hub's `reference_information` column: repr of a list of Description/Content dicts."""
    return repr([{"Description": r["Description"], "Content": r["Content"]} for r in records])


def constraint_text(**constraints: Any) -> str:
    """The hub's `local_constraint` column, e.g. constraint_text(cuisine=["Indian"]); keys use spaces."""
    merged = dict(_EMPTY_CONSTRAINT)
    merged.update({key.replace("_", " "): value for key, value in constraints.items()})
    return repr(merged)


# ---- the fixtures --------------------------------------------------------------------------------

_BETA_RESTAURANTS = [("Cafe", 10, "Indian"), ("Diner", 15, "American"), ("Bistro", 20, "Italian"), ("Brunch", 12, "French")]
_BETA_LODGING = [
    ("Hotel", 100, "Private room", "No parties", 1, 2),
    ("Motel", 80, "Entire home/apt", "No smoking", 1, 4),
]
_CITY_RESTAURANTS = [("Cafe", 10, "Indian"), ("Diner", 15, "American"), ("Bistro", 20, "Italian")]
_CITY_LODGING = [("Hotel", 100, "Private room", "No parties", 1, 2)]


def _leg(origin: str, destination: str, date: str, flights: Sequence[tuple[str, int]]) -> list[dict[str, str]]:
    return [
        flight_record(origin, destination, date, flights),
        ground_record("Self-driving", origin, destination),
        ground_record("Taxi", origin, destination),
    ]


def three_day_records(restaurants: Sequence[tuple[str, int, str]] = tuple(_BETA_RESTAURANTS)) -> list[dict[str, str]]:
    return [
        attractions_record("Beta", ["Museum", "Park"]),
        restaurants_record("Beta", restaurants),
        accommodations_record("Beta", _BETA_LODGING),
        *_leg("Alpha", "Beta", "2022-01-01", [("F100", 20)]),
        *_leg("Beta", "Alpha", "2022-01-03", [("F200", 25)]),
    ]


def five_day_records(
    middle_flights: Sequence[tuple[str, int]] = (("F200", 30),), middle_self_driving: int | None = None
) -> list[dict[str, str]]:
    """The 5-day reference records; `middle_flights=()` makes the day-3 flight unavailable (the hub's
    "There is no flight" text) and `middle_self_driving=<cost>` offers Self-driving Beta->Gamma."""
    records: list[dict[str, str]] = []
    for city in ("Beta", "Gamma"):
        records += [
            attractions_record(city, ["Museum"]),
            restaurants_record(city, _CITY_RESTAURANTS),
            accommodations_record(city, _CITY_LODGING),
        ]
    records += _leg("Alpha", "Beta", "2022-01-01", [("F100", 20)])
    records += [
        flight_record("Beta", "Gamma", "2022-01-03", middle_flights),
        ground_record("Self-driving", "Beta", "Gamma", middle_self_driving),
        ground_record("Taxi", "Beta", "Gamma"),
    ]
    records += _leg("Gamma", "Alpha", "2022-01-05", [("F300", 25)])
    records += [ground_record("Taxi", "Gamma", "Beta", 5), ground_record("Taxi", "Beta", "Alpha", 5)]
    return records


def _apply(raw: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Overrides replace raw columns; a dict `local_constraint` is rendered like the hub's column."""
    for key, value in overrides.items():
        if key == "local_constraint" and isinstance(value, Mapping):
            value = constraint_text(**{k.replace(" ", "_"): v for k, v in value.items()})
        raw[key] = value
    return raw


def fixture_raw(**overrides: Any) -> dict[str, Any]:
    raw = {
        "org": "Alpha",
        "dest": "Beta",
        "days": 3,
        "visiting_city_number": 1,
        "date": repr(["2022-01-01", "2022-01-02", "2022-01-03"]),
        "people_number": 1,
        "local_constraint": constraint_text(),
        "budget": 1000,
        "query": (
            "Please help me plan a trip from Alpha to Beta spanning 3 days from January 1st to January 3rd, "
            "2022. The travel should be planned for a single person with a budget of $1,000."
        ),
        "level": "easy",
        "reference_information": reference_information(three_day_records()),
    }
    return _apply(raw, overrides)


def fixture_row(**overrides: Any) -> TravelRow:
    return normalise_row(fixture_raw(**overrides), 0)


def five_day_fixture_raw(**overrides: Any) -> dict[str, Any]:
    raw = {
        "org": "Alpha",
        "dest": "Beta",
        "days": 5,
        "visiting_city_number": 2,
        "date": repr(["2022-01-01", "2022-01-02", "2022-01-03", "2022-01-04", "2022-01-05"]),
        "people_number": 1,
        "local_constraint": constraint_text(),
        "budget": 1500,
        "query": (
            "Please help me plan a trip from Alpha to Beta and Gamma spanning 5 days from January 1st to "
            "January 5th, 2022. The travel should be planned for a single person with a budget of $1,500."
        ),
        "level": "easy",
        "reference_information": reference_information(five_day_records()),
    }
    return _apply(raw, overrides)


def five_day_fixture_row(**overrides: Any) -> TravelRow:
    return normalise_row(five_day_fixture_raw(**overrides), 1)


def duplicate_name_raw(**overrides: Any) -> dict[str, Any]:
    restaurants = [("Burger King", 98, "Pizza"), ("Burger King", 13, "Indian"), ("Cafe", 20, "Indian"), ("Diner", 15, "American")]
    base = {
        "level": "medium",
        "local_constraint": constraint_text(cuisine=["Indian"]),
        "reference_information": reference_information(three_day_records(restaurants)),
    }
    base.update(overrides)
    return fixture_raw(**base)


# ---- canonical plans and action texts -----------------------------------------------------------

# Per day: (current_city, transportation, accommodation, stay city or None), written out by hand.
_THREE_DAY_LOGISTICS = (
    ("from Alpha to Beta", "Flight Number: F100, from Alpha to Beta", "Hotel, Beta", None),
    ("Beta", "-", "Hotel, Beta", "Beta"),
    ("from Beta to Alpha", "Flight Number: F200, from Beta to Alpha", "-", None),
)
_FIVE_DAY_LOGISTICS = (
    ("from Alpha to Beta", "Flight Number: F100, from Alpha to Beta", "Hotel, Beta", None),
    ("Beta", "-", "Hotel, Beta", "Beta"),
    ("from Beta to Gamma", "Flight Number: F200, from Beta to Gamma", "Hotel, Gamma", None),
    ("Gamma", "-", "Hotel, Gamma", "Gamma"),
    ("from Gamma to Alpha", "Flight Number: F300, from Gamma to Alpha", "-", None),
)


def valid_plan_values(row: TravelRow) -> list[dict[str, Any]]:
    """The canonical valid plan of the 3-day or 5-day fixture: one dict per day with "day" and all 7 fields."""
    days = {3: _THREE_DAY_LOGISTICS, 5: _FIVE_DAY_LOGISTICS}.get(row.days)
    if days is None or row.org != "Alpha":
        raise ValueError(f"no canonical plan for row {row.id!r} ({row.days} days from {row.org!r})")
    plan = []
    for day, (current_city, transportation, accommodation, stay_city) in enumerate(days, start=1):
        entry: dict[str, Any] = {"day": day, **{field: "-" for field in PLAN_FIELDS}}
        entry.update(current_city=current_city, transportation=transportation, accommodation=accommodation)
        if stay_city:
            entry.update(
                breakfast=f"Cafe, {stay_city}",
                attraction=f"Museum, {stay_city}",
                lunch=f"Diner, {stay_city}",
                dinner=f"Bistro, {stay_city}",
            )
        plan.append(entry)
    return plan


def role_action_text(agent_id: int, plan: Sequence[Mapping[str, Any]], days: int) -> str:
    """Strict action text: exactly the role's owned slots in canonical order, json.dumps defaults."""
    by_day = {entry["day"]: entry for entry in plan}
    assignments = [{"day": day, "field": field, "value": by_day[day][field]} for day, field in owned_slots(agent_id, days)]
    return json.dumps({"agent_id": agent_id, "assignments": assignments})


def all_dash_action_text(agent_id: int, days: int) -> str:
    assignments = [{"day": day, "field": field, "value": "-"} for day, field in owned_slots(agent_id, days)]
    return json.dumps({"agent_id": agent_id, "assignments": assignments})
