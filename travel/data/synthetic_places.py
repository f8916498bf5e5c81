"""Places for synthetic rows: real US cities with approximate coordinates, and distances between them.

States with six or more cities host the multi-city trips (dest = the state); every city can be an
origin or a single-city destination.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


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
