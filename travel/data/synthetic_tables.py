"""Invented reference entities for synthetic rows and their rendering as the hub's fixed-width tables.

The tables reproduce `pandas.DataFrame.to_string` byte for byte (numeric headers carry a sign
space, floats use six decimals with common trailing zeros trimmed, values are right-justified,
an unnamed left-justified index column for restaurants). Rendering here is a direct
re-implementation because calling pandas once per table is too slow for 180 rows; the tests
compare both renderings on generated tables.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Optional, Sequence

from travel.data.synthetic_places import Place, great_circle_km

CUISINES: tuple[str, ...] = (
    "Seafood", "Tea", "Fast Food", "BBQ", "Bakery", "Desserts", "Cafe", "Pizza",
    "American", "Mediterranean", "Indian", "Italian", "Chinese", "French", "Mexican",
)
HOUSE_RULES: tuple[str, ...] = ("parties", "smoking", "children under 10", "visitors", "pets")
ROOM_TYPES: tuple[str, ...] = ("Entire home/apt", "Private room", "Shared room")

ATTRACTION_COLUMNS = ("Name", "Latitude", "Longitude", "Address", "Phone", "Website", "City")
RESTAURANT_COLUMNS = ("Name", "Average Cost", "Cuisines", "Aggregate Rating", "City")
ACCOMMODATION_COLUMNS = (
    "NAME", "price", "room type", "house_rules", "minimum nights", "maximum occupancy", "review rate number", "city",
)
FLIGHT_COLUMNS = (
    "Flight Number", "Price", "DepTime", "ArrTime", "ActualElapsedTime", "FlightDate", "OriginCityName",
    "DestCityName", "Distance",
)

_FLOAT_DIGITS = 6  # pandas display.precision


@dataclass
class Table:
    """Column names, row tuples (str, int or float cells) and an optional unnamed index."""

    columns: tuple[str, ...]
    rows: list[tuple]
    index: Optional[list[int]] = None

    def render(self) -> str:
        return render_table(self.columns, self.rows, self.index)


def _trim_float_column(texts: list[str]) -> list[str]:
    while texts and all(t.endswith("0") for t in texts):
        texts = [t[:-1] for t in texts]
    return [t + "0" if t.endswith(".") else t for t in texts]


def _format_column(values: Sequence, leading_space: bool) -> tuple[list[str], bool]:
    """Cell texts of one column and whether the column is numeric (numeric headers get a sign space)."""
    pad = " " if leading_space else ""
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return [f"{v: d}" if leading_space else f"{v:d}" for v in values], True
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        texts = _trim_float_column([f"{float(v):.{_FLOAT_DIGITS}f}" for v in values])
        return [(pad if not t.startswith("-") else "") + t if leading_space else t for t in texts], True
    return [pad + str(v) for v in values], False


def render_table(columns: Sequence[str], rows: Sequence[tuple], index: Optional[Sequence[int]] = None) -> str:
    """The text `pandas.DataFrame(rows, columns=columns, index=index).to_string(index=index is not None)` gives."""
    if not rows:
        raise ValueError("cannot render a table without rows")
    with_index = index is not None
    blocks: list[list[str]] = []
    if with_index:
        labels = [str(i) for i in index]
        width = max(len(t) for t in labels)
        blocks.append([" " * width] + [t.ljust(width) for t in labels])
    for position, name in enumerate(columns):
        texts, numeric = _format_column([row[position] for row in rows], with_index)
        header = " " + name if numeric else name
        width = max(len(header), *(len(t) for t in texts))
        blocks.append([header.rjust(width)] + [t.rjust(width) for t in texts])
    return "\n".join(" ".join(block[line] for block in blocks) for line in range(len(rows) + 1))


# ----------------------------------------------------------------------------------------------
# Invented names. Real TravelPlanner names mix plain words with digits, commas, '&', '@' and '!'.

def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split("|"))


_SURNAMES = _words(
    "Morgan|Harlow|Becker|Delgado|Okafor|Lindqvist|Patel|Romano|Nguyen|Castillo|Whitaker|Brennan|Kowalski|"
    "Adler|Fontaine|Reyes|Sato|Maddox|Ellery|Quinn"
)
_ADJECTIVES = _words(
    "Cedar|Golden|Old Mill|Riverside|Blue Heron|Twin Oaks|Silver Lake|Heritage|Pioneer|Lakeshore|Red Rock|"
    "Magnolia|Harbor|Summit|Willow Creek|Granite|Prairie|Sunset"
)
_ATTRACTION_KINDS = _words(
    "Park|Nature Preserve|Botanical Garden|Museum of Art|History Museum|Science Center|Zoo|Aquarium|"
    "State Park|Historic District|Memorial|Arboretum|Lighthouse|Trailhead|Gallery|Children's Museum|"
    "Observatory|Sculpture Garden|Riverwalk|Heritage Village"
)
_FOOD_WORDS = _words(
    "Grill|Kitchen|Bistro|Dhaba|Cafe|Diner|Tavern|Bakehouse|Noodle Bar|Smokehouse|Pizzeria|Taqueria|"
    "Brasserie|Canteen|Eatery|Chaat Corner|Tea House|Sweets"
)
_FOOD_ADJECTIVES = _words(
    "Spice|Urban|Royal|Happy|Little|Coastal|Golden|Rustic|Saffron|Copper|Green|Lucky|Midnight|Sunny|Smoky|"
    "Hungry|Velvet|Paprika"
)
_NEIGHBORHOODS = _words(
    "Williamsburg|Bushwick|Harlem|Chelsea|SoHo|Astoria|Greenpoint|Park Slope|Crown Heights|"
    "Upper West Side|East Village|Midtown|Gramercy|Nolita|Dumbo|Bed-Stuy"
)
_LODGING_ADJECTIVES = _words("Cozy|Spacious|Sunny|Charming|Bright|Modern|Quiet|Stylish|Airy|Renovated|Lovely|Artsy")
_LODGING_UNITS = _words(
    "room|studio|loft|1BR apartment|2 bedroom suite|garden flat|duplex|bedroom|private bath room|"
    "townhouse"
)
_STREETS = _words("Main St|Oak Ave|Park Blvd|River Rd|Market St|Lake Dr|Hill St|Elm St|2nd Ave")


def attraction_name(rng: random.Random, city: str) -> str:
    pattern = rng.random()
    if pattern < 0.3:
        return f"{city} {rng.choice(_ATTRACTION_KINDS)}"
    if pattern < 0.55:
        return f"{rng.choice(_ADJECTIVES)} {rng.choice(_ATTRACTION_KINDS)}"
    if pattern < 0.7:
        return f"{rng.choice(_SURNAMES)} {rng.choice(('House', 'Gardens', 'Landing', 'Mansion', 'Farm'))}"
    if pattern < 0.8:
        return f"Pier {rng.randint(1, 99)}" if rng.random() < 0.5 else f"{rng.randint(1850, 1960)} House Museum"
    if pattern < 0.9:
        word = rng.choice(("Arts", "Ships", "Trains", "Rails", "Rocks"))
        other = rng.choice(("Science Center", "Sails Museum", "Trolleys Museum", "Minerals Hall"))
        return f"{word} & {other}"
    area = rng.choice(("North Shore", "Old Town", "Upper Falls"))
    return f"{rng.choice(_ADJECTIVES)} {rng.choice(_ATTRACTION_KINDS)}, {area}"


def restaurant_name(rng: random.Random) -> str:
    pattern = rng.random()
    if pattern < 0.3:
        return f"{rng.choice(_FOOD_ADJECTIVES)} {rng.choice(_FOOD_WORDS)}"
    if pattern < 0.5:
        return f"{rng.choice(_SURNAMES)}'s {rng.choice(_FOOD_WORDS)}"
    if pattern < 0.62:
        suffix = rng.choice(("Bar", "Cocktails", "Lounge"))
        return f"{rng.choice(_FOOD_ADJECTIVES)} {rng.choice(_FOOD_WORDS)} & {suffix}"
    if pattern < 0.72:
        suffix = rng.choice(("Fine Dine", "Express", "Lounge"))
        return f"The {rng.choice(_FOOD_ADJECTIVES)} {rng.choice(_FOOD_WORDS)} - {suffix}"
    if pattern < 0.8:
        return f"{rng.choice(_FOOD_WORDS)} {rng.randint(7, 99)}"
    if pattern < 0.88:
        return f"Cafe {rng.choice(_SURNAMES)} @ The {rng.choice(('Landings', 'Mall', 'Square', 'Station'))}"
    return rng.choice(("Burger Hub", "Domino's Pizza", "Subway Stop", "Pizza Corner", "Tea Trails", "Food Junction"))


def lodging_name(rng: random.Random) -> str:
    pattern = rng.random()
    adjective, unit, place = rng.choice(_LODGING_ADJECTIVES), rng.choice(_LODGING_UNITS), rng.choice(_NEIGHBORHOODS)
    if pattern < 0.35:
        return f"{adjective} {unit} in {place}"
    if pattern < 0.55:
        return f"{adjective}, {rng.choice(_LODGING_ADJECTIVES).lower()} {unit}, near {place}"
    if pattern < 0.7:
        return f"{adjective} {rng.randint(2, 5)} Bedroom's {place} Apartment!"
    if pattern < 0.8:
        return f"{rng.randint(1, 3)}BR in {adjective} Apartment - Rm {rng.choice('ABCD')}, {place}!"
    if pattern < 0.9:
        return f"{adjective} {unit} near {place} & Metro"
    return f"{place} {unit.title()} w/ Private Bath"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())[:24] or "visit"


def attraction_contact(rng: random.Random, name: str, place: "Place") -> tuple[str, str, str]:
    """(address, phone, website) for an attraction."""
    zip_code = rng.randint(10000, 99999)
    street = f"{rng.randint(1, 9999)} {rng.choice(_STREETS)}, " if rng.random() < 0.8 else ""
    address = f"{street}{place.city}, {place.state_code} {zip_code}, USA"
    phone = f"({place.area_code}) {rng.randint(200, 999)}-{rng.randint(0, 9999):04d}"
    website = f"https://www.{_slug(name)}.{rng.choice(('org', 'com', 'gov'))}/"
    if rng.random() < 0.3:
        website += rng.choice(("visit/", "plan-your-visit/", "en/home/", "explore/things-to-do/"))
    if rng.random() < 0.12:
        website += "?utm_source=google&utm_medium=organic&utm_campaign=gbp_listing"
    return address, phone, website


def house_rules_text(rng: random.Random) -> str:
    count = rng.choices((1, 2, 3), weights=(60, 32, 8))[0]
    return " & ".join(f"No {rule}" for rule in rng.sample(HOUSE_RULES, count))


def restaurant_cuisines(rng: random.Random) -> list[str]:
    return rng.sample(CUISINES, rng.randint(2, 5))


def elapsed_text(minutes: int) -> str:
    return f"{minutes // 60} hours {minutes % 60} minutes"


def clock(minutes: int) -> str:
    minutes %= 24 * 60
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def ground_line(mode: str, origin: str, destination: str, distance_km: int, cost: int) -> str:
    """One self-driving or taxi record's content, in the hub's wording."""
    minutes = round(distance_km / 112.6 * 60)
    return (
        f"{mode}, from {origin} to {destination}, duration: {minutes // 60} hours {minutes % 60} mins, "
        f"distance: {distance_km:,} km, cost: {cost}"
    )


# ----------------------------------------------------------------------------------------------
# Entities of one row. They stay mutable until rendered so the row builder can make sure the
# feasible plan it picks exists in the tables (a cuisine, a lodging that admits the request).


def identity_key(name: str) -> str:
    return " ".join(name.split()).casefold()


@dataclass
class Restaurant:
    index: int
    name: str
    cost: int
    cuisines: list[str]
    rating: float
    owns_identity: bool = True  # first row of its (name, city): the row the evaluator reads


@dataclass
class Lodging:
    name: str
    price: float
    room_type: str
    house_rules: str
    minimum_nights: float
    maximum_occupancy: int
    review: float


@dataclass
class CityBlock:
    place: Place
    attractions: list[tuple]  # ATTRACTION_COLUMNS order
    restaurants: list[Restaurant]
    lodgings: list[Lodging]

    def tables(self) -> list[tuple[str, Table]]:
        city = self.place.city
        restaurant_rows = [(r.name, r.cost, ", ".join(r.cuisines), r.rating, city) for r in self.restaurants]
        lodging_rows = [
            (l.name, l.price, l.room_type, l.house_rules, l.minimum_nights, l.maximum_occupancy, l.review, city)
            for l in self.lodgings
        ]
        return [
            (f"Attractions in {city}", Table(ATTRACTION_COLUMNS, self.attractions)),
            (f"Restaurants in {city}", Table(RESTAURANT_COLUMNS, restaurant_rows, [r.index for r in self.restaurants])),
            (f"Accommodations in {city}", Table(ACCOMMODATION_COLUMNS, lodging_rows)),
        ]

    def records(self) -> list[dict[str, str]]:
        return [{"Description": description, "Content": table.render()} for description, table in self.tables()]


_LODGING_RANGES = {"Entire home/apt": (150, 1200, 10), "Private room": (50, 1100, 3), "Shared room": (40, 400, 2)}


def _rating(rng: random.Random) -> float:
    return 0.0 if rng.random() < 0.08 else round(rng.uniform(2.0, 4.9), 1)


def _unique_names(rng: random.Random, count: int, invent) -> list[str]:
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < count:
        name = invent(rng)
        if identity_key(name) not in seen:
            seen.add(identity_key(name))
            names.append(name)
    return names


def build_city_block(rng: random.Random, place: Place, *, only_city: bool = False) -> CityBlock:
    """Tables of one visited city; a single-city trip gets longer tables, as in the hub."""
    city = place.city
    attractions = []
    for name in _unique_names(rng, rng.randint(18 if only_city else 14, 20), lambda r: attraction_name(r, city)):
        address, phone, website = attraction_contact(rng, name, place)
        latitude = round(place.latitude + rng.uniform(-0.15, 0.15), 6)
        longitude = round(place.longitude + rng.uniform(-0.15, 0.15), 6)
        attractions.append((name, latitude, longitude, address, phone, website, city))

    count = rng.randint(28, 40) if only_city else rng.randint(20, 34)
    indices = sorted(rng.sample(range(9552), count))
    restaurants = [
        Restaurant(i, name, rng.randint(10, 100), restaurant_cuisines(rng), _rating(rng))
        for i, name in zip(indices, _unique_names(rng, count, restaurant_name))
    ]
    for _ in range(rng.choice((0, 1, 1, 2))):  # a later row repeating an earlier name, as the hub has
        later = rng.randrange(1, count)
        restaurants[later].name = restaurants[rng.randrange(later)].name
    for r in restaurants:
        if rng.random() < 0.03:
            r.name += " "  # the hub keeps trailing blanks inside some names
    seen: set[str] = set()
    for r in restaurants:
        r.owns_identity = identity_key(r.name) not in seen
        seen.add(identity_key(r.name))

    lodgings = []
    for name in _unique_names(rng, rng.randint(10, 18) if only_city else rng.randint(7, 15), lodging_name):
        room_type = rng.choices(ROOM_TYPES, weights=(50, 46, 4))[0]
        low, high, occupancy = _LODGING_RANGES[room_type]
        minimum = rng.choices((1, 2, 3, 4, 5, 7, 10, 14, 30), weights=(24, 26, 15, 8, 5, 5, 3, 3, 7))[0]
        lodgings.append(Lodging(name, float(rng.randint(low, high)), room_type, house_rules_text(rng),
                                float(minimum), rng.randint(1, occupancy), float(rng.randint(1, 5))))
    return CityBlock(place, attractions, restaurants, lodgings)


@dataclass
class Flight:
    number: str
    price: int
    departure: int  # minutes after midnight
    elapsed: int  # minutes
    miles: float


@dataclass
class Leg:
    day: int
    date: str
    origin: str
    destination: str
    flights: list[Flight]
    road_km: int
    ground_available: bool

    @property
    def self_driving_cost(self) -> int:
        return max(1, int(self.road_km * 0.05))

    @property
    def taxi_cost(self) -> int:
        return self.road_km

    def flight_table(self) -> Optional[Table]:
        if not self.flights:
            return None
        rows = [
            (f.number, f.price, clock(f.departure), clock(f.departure + f.elapsed), elapsed_text(f.elapsed), self.date,
             self.origin, self.destination, f.miles)
            for f in self.flights
        ]
        return Table(FLIGHT_COLUMNS, rows)

    def records(self) -> list[dict[str, str]]:
        route = f"from {self.origin} to {self.destination}"
        table = self.flight_table()
        flight = table.render() if table else f"There is no flight {route} on {self.date}."
        if self.ground_available:
            driving = ground_line("self-driving", self.origin, self.destination, self.road_km, self.self_driving_cost)
            taxi = ground_line("taxi", self.origin, self.destination, self.road_km, self.taxi_cost)
        else:
            driving = taxi = "No valid information."
        return [
            {"Description": f"Flight {route} on {self.date}", "Content": flight},
            {"Description": f"Self-driving {route}", "Content": driving},
            {"Description": f"Taxi {route}", "Content": taxi},
        ]


def build_leg(
    rng: random.Random, day: int, date: str, origin: Place, destination: Place, *, has_flights: bool, has_ground: bool
) -> Leg:
    km = great_circle_km(origin, destination)
    miles = max(40.0, round(km / 1.609))
    flights = []
    if has_flights:
        numbers = sorted(rng.sample(range(3_000_000, 4_200_000), rng.randint(1, 12)))
        for number in numbers:
            price = max(25, round((40 + 0.25 * miles) * rng.uniform(0.6, 1.6)))
            elapsed = max(35, round(35 + miles * 0.12 + rng.uniform(-10, 15)))
            distance = miles + rng.choice((0.0, 0.0, 1.0))  # the hub's distances vary by a mile between carriers
            flights.append(Flight(f"F{number}", price, rng.randint(300, 1380), elapsed, distance))
    return Leg(day, date, origin.city, destination.city, flights, max(25, round(km * 1.22)), has_ground)
