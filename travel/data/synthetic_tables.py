"""Invented reference entities for synthetic rows and their rendering as the hub's fixed-width tables.

The tables reproduce `pandas.DataFrame.to_string` byte for byte (numeric headers carry a sign
space, floats use six decimals with common trailing zeros trimmed, values are right-justified,
an unnamed left-justified index column for restaurants). Rendering here is a direct
re-implementation because calling pandas once per table is too slow for 180 rows; the tests
compare both renderings on generated tables.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Optional, Sequence

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
# Places: real US cities with approximate coordinates; states with six or more cities host the
# multi-city trips (dest = the state), every city can be an origin or a single-city destination.

_PLACES = """
Texas|TX|214 512 806|Dallas 32.78 -96.80;Houston 29.76 -95.37;Austin 30.27 -97.74;San Antonio 29.42 -98.49;
    El Paso 31.76 -106.49;Abilene 32.45 -99.73;Amarillo 35.22 -101.83;Lubbock 33.58 -101.86;
    Corpus Christi 27.80 -97.40;Killeen 31.12 -97.73;San Angelo 31.46 -100.44;Wichita Falls 33.91 -98.49;
    Laredo 27.53 -99.49
California|CA|213 415 619|Los Angeles 34.05 -118.24;San Francisco 37.77 -122.42;San Diego 32.72 -117.16;
    Sacramento 38.58 -121.49;San Jose 37.34 -121.89;Oakland 37.80 -122.27;Long Beach 33.77 -118.19;
    Santa Ana 33.75 -117.87;Fresno 36.74 -119.79;Bakersfield 35.37 -119.02;Santa Barbara 34.42 -119.70;
    Monterey 36.60 -121.89
Florida|FL|305 407 813|Miami 25.76 -80.19;Orlando 28.54 -81.38;Tampa 27.95 -82.46;Jacksonville 30.33 -81.66;
    St. Petersburg 27.77 -82.64;Fort Lauderdale 26.12 -80.14;Pensacola 30.42 -87.22;
    Tallahassee 30.44 -84.28;Punta Gorda 26.93 -82.05;Key West 24.56 -81.78;Daytona Beach 29.21 -81.02;
    Fort Myers 26.64 -81.87
New York|NY|212 716 518|New York 40.71 -74.01;Buffalo 42.89 -78.88;Rochester 43.16 -77.61;
    Syracuse 43.05 -76.15;Albany 42.65 -73.75;Ithaca 42.44 -76.50;Niagara Falls 43.09 -79.06;
    Elmira 42.09 -76.81;White Plains 41.03 -73.76
Colorado|CO|303 719 970|Denver 39.74 -104.99;Colorado Springs 38.83 -104.82;Grand Junction 39.06 -108.55;
    Durango 37.28 -107.88;Alamosa 37.47 -105.87;Aspen 39.19 -106.82;Gunnison 38.55 -106.93;
    Pueblo 38.25 -104.61
Michigan|MI|313 616 906|Detroit 42.33 -83.05;Grand Rapids 42.96 -85.67;Lansing 42.73 -84.56;
    Kalamazoo 42.29 -85.59;Traverse City 44.76 -85.62;Marquette 46.54 -87.40;Alpena 45.06 -83.43;
    Pellston 45.55 -84.78;Sault Ste. Marie 46.50 -84.35
North Carolina|NC|704 919 828|Charlotte 35.23 -80.84;Raleigh 35.78 -78.64;Greensboro 36.07 -79.79;
    Wilmington 34.23 -77.94;Asheville 35.60 -82.55;New Bern 35.11 -77.04;Greenville 35.61 -77.37
Pennsylvania|PA|215 412 814|Philadelphia 39.95 -75.17;Pittsburgh 40.44 -80.00;Harrisburg 40.27 -76.88;
    Allentown 40.60 -75.47;Erie 42.13 -80.09;State College 40.79 -77.86;Scranton 41.41 -75.66;
    Johnstown 40.33 -78.92;Latrobe 40.32 -79.38
Ohio|OH|614 216 513|Columbus 39.96 -83.00;Cleveland 41.50 -81.69;Cincinnati 39.10 -84.51;
    Toledo 41.65 -83.54;Dayton 39.76 -84.19;Akron 41.08 -81.52
Washington|WA|206 509 360|Seattle 47.61 -122.33;Spokane 47.66 -117.43;Yakima 46.60 -120.51;
    Wenatchee 47.42 -120.31;Pasco 46.24 -119.10;Bellingham 48.75 -122.48;Walla Walla 46.06 -118.34
Utah|UT|801 435 385|Salt Lake City 40.76 -111.89;Provo 40.23 -111.66;Ogden 41.22 -111.97;Moab 38.57 -109.55;
    St. George 37.10 -113.58;Vernal 40.46 -109.53;Cedar City 37.68 -113.06
Georgia|GA|404 912 478|Atlanta 33.75 -84.39;Savannah 32.08 -81.09;Augusta 33.47 -81.97;Macon 32.84 -83.63;
    Valdosta 30.83 -83.28;Brunswick 31.15 -81.49
Minnesota|MN|612 218 320|Minneapolis 44.98 -93.27;Duluth 46.79 -92.10;St. Cloud 45.56 -94.16;
    Bemidji 47.47 -94.88;Brainerd 46.36 -94.20;International Falls 48.60 -93.41;Hibbing 47.43 -92.94
Oregon|OR|503 541 458|Portland 45.52 -122.68;Eugene 44.05 -123.09;Medford 42.33 -122.87;Bend 44.06 -121.31;
    Salem 44.94 -123.04;Redmond 44.27 -121.17
Wisconsin|WI|414 608 920|Milwaukee 43.04 -87.91;Madison 43.07 -89.40;Green Bay 44.51 -88.01;
    Appleton 44.26 -88.42;Mosinee 44.79 -89.70;Rhinelander 45.64 -89.41;Eau Claire 44.81 -91.50;
    La Crosse 43.80 -91.24
Nevada|NV|702|Las Vegas 36.17 -115.14;Reno 39.53 -119.81
Arizona|AZ|602|Phoenix 33.45 -112.07;Tucson 32.22 -110.97;Flagstaff 35.20 -111.65
Tennessee|TN|615|Nashville 36.16 -86.78;Memphis 35.15 -90.05;Chattanooga 35.05 -85.31;
    Knoxville 35.96 -83.92
Louisiana|LA|504|New Orleans 29.95 -90.07;Baton Rouge 30.45 -91.15;Lafayette 30.22 -92.02
Missouri|MO|816|Kansas City 39.10 -94.58;St. Louis 38.63 -90.20;Springfield 37.21 -93.29
Indiana|IN|317|Indianapolis 39.77 -86.16;Evansville 37.97 -87.57;South Bend 41.68 -86.25
Kentucky|KY|502|Louisville 38.25 -85.76;Lexington 38.04 -84.50
Virginia|VA|804|Richmond 37.54 -77.44;Norfolk 36.85 -76.29;Roanoke 37.27 -79.94
Oklahoma|OK|405|Oklahoma City 35.47 -97.52;Tulsa 36.15 -95.99
Illinois|IL|312|Chicago 41.88 -87.63;Rockford 42.27 -89.09;Moline 41.51 -90.52;Peoria 40.69 -89.59
Massachusetts|MA|617|Boston 42.36 -71.06
Maryland|MD|410|Baltimore 39.29 -76.61
Idaho|ID|208|Boise 43.62 -116.21
New Mexico|NM|505|Albuquerque 35.08 -106.65
Nebraska|NE|402|Omaha 41.26 -95.93
Alabama|AL|205|Birmingham 33.52 -86.80
South Carolina|SC|843|Charleston 32.78 -79.93
Montana|MT|406|Billings 45.78 -108.50
Maine|ME|207|Bangor 44.80 -68.77
North Dakota|ND|701|Fargo 46.88 -96.79
Iowa|IA|515|Des Moines 41.59 -93.62
Mississippi|MS|228|Gulfport 30.37 -89.09
Arkansas|AR|501|Little Rock 34.75 -92.29
"""


@dataclass(frozen=True)
class Place:
    city: str
    state: str
    state_code: str
    area_code: int
    latitude: float
    longitude: float


def _read_places() -> dict[str, Place]:
    places: dict[str, Place] = {}
    for line in re.sub(r"\n\s+", "", _PLACES.strip()).splitlines():  # indented lines continue a state
        state, code, areas, cities = line.split("|")
        area_codes = [int(a) for a in areas.split()]
        for position, item in enumerate(cities.split(";")):
            name, lat, lon = item.rsplit(" ", 2)
            places[name] = Place(name, state, code, area_codes[position % len(area_codes)], float(lat), float(lon))
    return places


PLACES: dict[str, Place] = _read_places()
MULTI_CITY_STATES: tuple[str, ...] = tuple(
    state for state in dict.fromkeys(p.state for p in PLACES.values())
    if sum(p.state == state for p in PLACES.values()) >= 6
)


def great_circle_km(a: Place, b: Place) -> float:
    lat1, lon1, lat2, lon2 = map(math.radians, (a.latitude, a.longitude, b.latitude, b.longitude))
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 2 * 6371.0 * math.asin(math.sqrt(h))


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
