"""Offline synthetic TravelPlanner rows in the hub's exact format, each built around a hidden feasible plan.

`SyntheticSource(seed, num_rows).load_raw()` returns rows with the hub's 11 columns, laid out like the
180-row validation split: easy rows 0-59, medium 60-119, hard 120-179; within a level 20 rows each of
3, 5 and 7 days visiting 1, 2 and 3 cities. Each row comes from its own RNG seeded by (seed, row
index), so a shorter source is a prefix of a longer one. The plan a row was built around is never a
column; read it through `SyntheticSource.feasible_plans()` or `feasible_plan(raw_row)`.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import hashlib
import math
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping, Optional

from travel.data.synthetic_places import MULTI_CITY_STATES, PLACES
from travel.data.synthetic_query import write_query
from travel.data.synthetic_tables import (
    CityBlock,
    Flight,
    Leg,
    Lodging,
    Restaurant,
    build_city_block,
    build_leg,
    great_circle_km,
)
from travel.task.fields import PLAN_FIELDS

LEVELS: tuple[str, ...] = ("easy", "medium", "hard")
TRIP_DAYS: tuple[int, ...] = (3, 5, 7)
CITIES_PER_TRIP: dict[int, int] = {3: 1, 5: 2, 7: 3}
ROWS_PER_CELL = 20
SPLIT_ROWS = len(LEVELS) * len(TRIP_DAYS) * ROWS_PER_CELL  # 180, the validation split's size

CONSTRAINT_KEYS: tuple[str, ...] = ("house rule", "cuisine", "room type", "transportation")
ROOM_TYPE_REQUESTS: tuple[str, ...] = ("not shared room", "entire room", "private room", "shared room")
HOUSE_RULE_REQUESTS: tuple[str, ...] = ("parties", "smoking", "children under 10", "visitors", "pets")
TRANSPORT_REQUESTS: tuple[str, ...] = ("no flight", "no self-driving")
CUISINE_REQUESTS: tuple[str, ...] = ("American", "Chinese", "French", "Indian", "Italian", "Mediterranean", "Mexican")
_CUISINES_PER_LEVEL = {"medium": 2, "hard": 4}
_CONSTRAINTS_PER_LEVEL = {"easy": 0, "medium": 1, "hard": 3}
_NIGHTS_PER_CITY = 2  # arrive on a move day, stay the next day, leave the day after
_ROOM_FOR_REQUEST = {"shared room": "Shared room", "private room": "Private room"}  # others: Entire home/apt


def row_layout(index: int) -> tuple[str, int, int]:
    """(level, days, visiting_city_number) of validation row `index`."""
    if not 0 <= index < SPLIT_ROWS:
        raise ValueError(f"row index {index} outside the {SPLIT_ROWS}-row layout")
    level = LEVELS[index // (len(TRIP_DAYS) * ROWS_PER_CELL)]
    days = TRIP_DAYS[(index % (len(TRIP_DAYS) * ROWS_PER_CELL)) // ROWS_PER_CELL]
    return level, days, CITIES_PER_TRIP[days]


# ----------------------------------------------------------------------------------------------
# Constraint rules, as the evaluator applies them (docs/reward.md "Hard constraints").


def room_type_allows(room_type: str, request: Optional[str]) -> bool:
    if request is None:
        return True
    room = room_type.casefold()
    if request == "not shared room":
        return room != "shared room"
    if request == "entire room":
        return room == "entire home/apt"
    return room == request


def house_rules_allow(house_rules: str, request: Optional[str]) -> bool:
    return request is None or f"no {request}" not in " ".join(house_rules.split()).casefold()


def _draw_constraints(rng: random.Random, level: str) -> dict[str, Any]:
    constraint: dict[str, Any] = {key: None for key in CONSTRAINT_KEYS}
    for key in rng.sample(CONSTRAINT_KEYS, _CONSTRAINTS_PER_LEVEL[level]):
        if key == "cuisine":
            constraint[key] = rng.sample(CUISINE_REQUESTS, _CUISINES_PER_LEVEL[level])
        elif key == "room type":
            constraint[key] = rng.choice(ROOM_TYPE_REQUESTS)
        elif key == "house rule":
            constraint[key] = rng.choice(HOUSE_RULE_REQUESTS)
        else:
            constraint[key] = rng.choice(TRANSPORT_REQUESTS)
    return constraint


# ----------------------------------------------------------------------------------------------
# Choosing the plan inside the generated tables, adjusting the tables where a choice is missing.


def _choose_lodging(rng: random.Random, block: CityBlock, constraint: Mapping[str, Any], people: int) -> Lodging:
    room_request, rule_request = constraint["room type"], constraint["house rule"]

    def eligible(lodging: Lodging) -> bool:
        return (
            room_type_allows(lodging.room_type, room_request)
            and house_rules_allow(lodging.house_rules, rule_request)
            and lodging.minimum_nights <= _NIGHTS_PER_CITY
        )

    candidates = [l for l in block.lodgings if eligible(l)]
    if not candidates:  # make one listing admit the request
        lodging = rng.choice(block.lodgings)
        if not room_type_allows(lodging.room_type, room_request):
            lodging.room_type = _ROOM_FOR_REQUEST.get(room_request, "Entire home/apt")
        if not house_rules_allow(lodging.house_rules, rule_request):
            kept = [part for part in lodging.house_rules.split(" & ") if part.casefold() != f"no {rule_request}"]
            others = [rule for rule in HOUSE_RULE_REQUESTS if rule != rule_request]
            lodging.house_rules = " & ".join(kept) or f"No {rng.choice(others)}"
        lodging.minimum_nights = float(rng.randint(1, _NIGHTS_PER_CITY))
        candidates = [lodging]
    candidates.sort(key=lambda l: l.price * _rooms(people, l))
    return rng.choice(candidates[:3])  # thrifty for the whole party, though not always the cheapest


def _choose_restaurants(rng: random.Random, blocks: list[CityBlock], wanted: list[str]) -> list[list[Restaurant]]:
    """Three distinct restaurants per visited city, covering every requested cuisine across the trip."""
    missing = {c.casefold() for c in wanted}
    chosen: list[list[Restaurant]] = []
    for block in blocks:
        # cheap first, with noise so the pick is not always the three cheapest
        price = {id(r): r.cost + rng.uniform(0, 40) for r in block.restaurants}
        pool = sorted((r for r in block.restaurants if r.owns_identity), key=lambda r: price[id(r)])
        picks: list[Restaurant] = []
        for _ in range(3):
            best = max(pool, key=lambda r: len(missing & {c.casefold() for c in r.cuisines}))  # first of the ties
            pool.remove(best)
            picks.append(best)
            missing -= {c.casefold() for c in best.cuisines}
        chosen.append(picks)
    picked = [r for picks in chosen for r in picks]
    for cuisine in sorted(missing):  # give a chosen restaurant the cuisine no choice covers
        restaurant = rng.choice(picked)
        replaceable = [c for c in restaurant.cuisines if c.casefold() not in {w.casefold() for w in wanted}]
        if len(restaurant.cuisines) >= 5 and replaceable:
            restaurant.cuisines.remove(rng.choice(replaceable))
        spelled = next(w for w in wanted if w.casefold() == cuisine)
        restaurant.cuisines.insert(rng.randrange(len(restaurant.cuisines) + 1), spelled)
    return chosen


def _flight_value(leg: Leg, flight: Flight) -> str:
    """What a plan's transportation field says for `flight` on `leg`."""
    return f"Flight Number: {flight.number}, from {leg.origin} to {leg.destination}"


def _choose_transport(rng: random.Random, legs: list[Leg], request: Optional[str]) -> list[tuple[str, float, str]]:
    """Per leg (mode, unit cost, plan value); never mixes self-driving with flights or taxis."""
    ground_everywhere = all(leg.ground_available for leg in legs)
    if request == "no flight":
        driving = rng.random() < 0.8
    elif request == "no self-driving":
        driving = False
    else:  # a leg without flights makes driving the cheap choice (a taxi costs about a dollar per km)
        driving = ground_everywhere and rng.random() < (0.8 if any(not leg.flights for leg in legs) else 0.2)
    choices = []
    for leg in legs:
        route = f"from {leg.origin} to {leg.destination}"
        if request == "no flight" or driving or not leg.flights:
            mode = "self-driving" if driving else "taxi"
            cost = leg.self_driving_cost if driving else leg.taxi_cost
            choices.append((mode, float(cost), f"{'Self-driving' if driving else 'Taxi'}, {route}"))
        else:
            flight = rng.choice(sorted(leg.flights, key=lambda f: f.price)[:3])
            choices.append(("flight", float(flight.price), _flight_value(leg, flight)))
    return choices


def _rooms(people: int, lodging: Lodging) -> int:
    return math.ceil(people / max(1, lodging.maximum_occupancy))


_PARTY_DIVISOR = {"flight": None, "taxi": 4, "self-driving": 5}


def _assemble_plan(
    legs: list[Leg],
    blocks: list[CityBlock],
    transport: list[tuple[str, float, str]],
    lodgings: list[Lodging],
    restaurants: list[list[Restaurant]],
    attractions: list[str],
    people: int,
) -> tuple[list[dict[str, str]], float]:
    """Day-by-day plan (move on odd days, stay on even days) and its full-party cost."""
    days = 2 * len(blocks) + 1
    plan: list[dict[str, str]] = []
    cost = 0.0
    for day in range(1, days + 1):
        if day % 2:  # move day: leg k carries the party from route city k to route city k + 1
            leg_number = (day - 1) // 2
            leg, (mode, unit_cost, value) = legs[leg_number], transport[leg_number]
            divisor = _PARTY_DIVISOR[mode]
            cost += unit_cost * (people if divisor is None else math.ceil(people / divisor))
            row = {"current_city": f"from {leg.origin} to {leg.destination}", "transportation": value,
                   "breakfast": "-", "attraction": "-", "lunch": "-", "dinner": "-"}
            city_number = leg_number if day < days else None
        else:
            city_number = day // 2 - 1
            city = blocks[city_number].place.city
            breakfast, lunch, dinner = restaurants[city_number]
            cost += people * (breakfast.cost + lunch.cost + dinner.cost)
            row = {"current_city": city, "transportation": "-", "attraction": f"{attractions[city_number]}, {city}",
                   "breakfast": f"{breakfast.name.strip()}, {city}", "lunch": f"{lunch.name.strip()}, {city}",
                   "dinner": f"{dinner.name.strip()}, {city}"}
        if city_number is None:
            row["accommodation"] = "-"
        else:
            lodging = lodgings[city_number]
            cost += lodging.price * _rooms(people, lodging)
            row["accommodation"] = f"{lodging.name.strip()}, {blocks[city_number].place.city}"
        plan.append({field: row[field] for field in PLAN_FIELDS})
    return plan, cost


# ----------------------------------------------------------------------------------------------
# The natural-language request, in the hub's phrasing.


# ----------------------------------------------------------------------------------------------
# One row.


@dataclass(frozen=True)
class SyntheticRow:
    raw: dict[str, Any]
    plan: list[dict[str, str]]
    plan_cost: float
    blocks: tuple[CityBlock, ...]
    legs: tuple[Leg, ...]


def _pick_places(rng: random.Random, cities: int):
    if cities == 1:
        visited = [rng.choice(list(PLACES.values()))]
        dest = visited[0].city
    else:
        state = rng.choice(MULTI_CITY_STATES)
        # a city named like the state (New York) would make `dest` read as a city the route must reach
        visited = rng.sample([p for p in PLACES.values() if p.state == state and p.city != state], cities)
        dest = state
    origin = rng.choice([p for p in PLACES.values() if p not in visited and p.city != dest])
    return origin, visited, dest


def _shortened(block: CityBlock, table_rows: int, plan_entities: set[int], attraction: str) -> CityBlock:
    """The block with each table cut to its first `table_rows` entries plus the plan's own, in table order."""

    def kept(entries: list, planned) -> list:
        return [entry for position, entry in enumerate(entries) if position < table_rows or planned(entry)]

    return CityBlock(
        block.place,
        kept(block.attractions, lambda row: row[0] == attraction),
        kept(block.restaurants, lambda restaurant: id(restaurant) in plan_entities),
        kept(block.lodgings, lambda lodging: id(lodging) in plan_entities),
    )


def _shortened_leg(leg: Leg, table_rows: int, flown: set[str]) -> Leg:
    """The leg with its flight table cut to its first `table_rows` flights plus the one the plan takes."""
    kept = [
        flight for position, flight in enumerate(leg.flights)
        if position < table_rows or _flight_value(leg, flight) in flown
    ]
    return dataclasses.replace(leg, flights=kept)


def synthesize_row(seed: int, index: int, table_rows: Optional[int] = None) -> SyntheticRow:
    """Row `index` of the synthetic split for `seed`, with the plan it was built around.

    `table_rows` cuts every attraction, restaurant, accommodation and flight table to its first `table_rows`
    entries plus the ones the plan uses (the rest of the row is the same: the tables are drawn whole, then cut)."""
    level, days, cities = row_layout(index)
    rng = random.Random(f"travel-synthetic:{seed}:{index}")
    origin, visited, dest = _pick_places(rng, cities)
    start = dt.date(2022, 3, 1) + dt.timedelta(days=rng.randint(0, 31 - days))
    dates = [start + dt.timedelta(days=offset) for offset in range(days)]
    people = 1 if level == "easy" else rng.choices(range(1, 9), weights=(8, 30, 14, 14, 10, 8, 8, 8))[0]
    constraint = _draw_constraints(rng, level)

    blocks = [build_city_block(rng, place, only_city=cities == 1) for place in visited]
    route = [origin, *visited, origin]
    legs = []
    for number in range(len(route) - 1):
        # the hub lacks flights mostly between nearby towns; a long leg without one forces a costly taxi
        nearby = great_circle_km(route[number], route[number + 1]) < 800
        has_flights = rng.random() >= (0.45 if nearby else 0.15)
        has_ground = not (has_flights and constraint["transportation"] != "no flight" and rng.random() < 0.06)
        day = 2 * number + 1
        legs.append(build_leg(rng, day, dates[day - 1].isoformat(), route[number], route[number + 1],
                              has_flights=has_flights, has_ground=has_ground))

    transport = _choose_transport(rng, legs, constraint["transportation"])
    lodgings = [_choose_lodging(rng, block, constraint, people) for block in blocks]
    restaurants = _choose_restaurants(rng, blocks, list(constraint["cuisine"] or []))
    attractions = [rng.choice(block.attractions)[0] for block in blocks]
    plan, cost = _assemble_plan(legs, blocks, transport, lodgings, restaurants, attractions, people)
    budget = int(math.ceil(cost * rng.uniform(1.2, 1.6) / 100.0) * 100)
    if table_rows is not None:
        planned = {id(entity) for entity in [*lodgings, *(r for picks in restaurants for r in picks)]}
        blocks = [_shortened(block, table_rows, planned, name) for block, name in zip(blocks, attractions)]
        flown = {value for mode, _, value in transport if mode == "flight"}
        legs = [_shortened_leg(leg, table_rows, flown) for leg in legs]

    records = [record for block in blocks for record in block.records()]
    records += [record for leg in legs for record in leg.records()]
    raw = {
        "org": origin.city,
        "dest": dest,
        "days": days,
        "visiting_city_number": cities,
        "date": repr([d.isoformat() for d in dates]),
        "people_number": people,
        "local_constraint": repr(constraint),
        "budget": budget,
        "query": write_query(rng, origin.city, dest, dates, people, budget, cities, constraint),
        "level": level,
        "reference_information": repr(records),
    }
    return SyntheticRow(raw, plan, cost, tuple(blocks), tuple(legs))


# ----------------------------------------------------------------------------------------------
# The source the data config instantiates.

_PLANS_BY_FINGERPRINT: dict[str, list[dict[str, str]]] = {}


def _fingerprint(raw_row: Mapping[str, Any]) -> str:
    text = "\x1f".join(str(raw_row.get(column, "")) for column in ("query", "date", "reference_information"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@lru_cache(maxsize=8)
def _synthesize(seed: int, num_rows: int, table_rows: Optional[int]) -> tuple[SyntheticRow, ...]:
    rows = tuple(synthesize_row(seed, index, table_rows) for index in range(num_rows))
    for row in rows:
        _PLANS_BY_FINGERPRINT[_fingerprint(row.raw)] = row.plan
    return rows


@dataclass(frozen=True)
class SyntheticSource:
    """Deterministic synthetic rows: `num_rows` (at most 180) rows of the validation layout for `seed`.

    `table_rows` (None: the hub's lengths) shortens the attraction, restaurant, accommodation and flight tables
    (`synthesize_row`): shorter prompts for CPU runs of a tiny model, the same trips and plans."""

    seed: int = 0
    num_rows: int = SPLIT_ROWS
    table_rows: Optional[int] = None

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"SyntheticSource: seed must be an integer, got {self.seed!r}")
        valid_count = isinstance(self.num_rows, int) and not isinstance(self.num_rows, bool)
        if not valid_count or not 1 <= self.num_rows <= SPLIT_ROWS:
            raise ValueError(f"SyntheticSource: num_rows must be an integer in 1..{SPLIT_ROWS}, got {self.num_rows!r}")
        valid_rows = isinstance(self.table_rows, int) and not isinstance(self.table_rows, bool) and self.table_rows >= 1
        if self.table_rows is not None and not valid_rows:
            raise ValueError(f"SyntheticSource: table_rows must be null or an integer >= 1, got {self.table_rows!r}")

    split_name = "validation"

    def describe(self) -> str:
        tables = "" if self.table_rows is None else f", tables cut to {self.table_rows} rows plus the plan's"
        return f"synthetic rows (seed {self.seed}, {self.num_rows} rows in the validation layout{tables})"

    def load_raw(self) -> list[dict[str, Any]]:
        """Rows in the hub's format (11 columns, no plan column); fresh dicts on every call."""
        return [dict(row.raw) for row in _synthesize(self.seed, self.num_rows, self.table_rows)]

    def feasible_plans(self) -> list[list[dict[str, str]]]:
        """Per row, the plan the row was built around: one dict of the 7 plan fields per day."""
        return [copy.deepcopy(row.plan) for row in _synthesize(self.seed, self.num_rows, self.table_rows)]


def feasible_plan(raw_row: Mapping[str, Any]) -> list[dict[str, str]]:
    """The plan behind a row that a SyntheticSource produced in this process (KeyError otherwise)."""
    plan = _PLANS_BY_FINGERPRINT.get(_fingerprint(raw_row))
    if plan is None:
        raise KeyError(
            "feasible_plan: this row was not produced by a SyntheticSource in this process "
            f"(org={raw_row.get('org')!r}, dest={raw_row.get('dest')!r}, date={raw_row.get('date')!r})"
        )
    return copy.deepcopy(plan)
