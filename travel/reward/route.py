"""Route components of a generated plan: the nine checks behind the reasonable-route commonsense check.

Every city here is canonical text (see travel.data.text.canonical). A day's route is
(kind, start, end) with kind "move" or "stay" (a stay has start == end), or None when the day's
current_city is empty, unparsable or a self-loop move.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from travel.data.scaffold import ScaffoldDay, parse_current_city
from travel.data.text import canonical

Route = tuple[str, str, str]  # (kind, canonical start, canonical end)

ROUTE_COMPONENTS: tuple[str, ...] = (
    "parse_rate",
    "continuity",
    "starts_at_origin",
    "closed_loop",
    "visiting_city_count",
    "allowed_city_rate",
    "no_revisit",
    "destination_reached",
    "scaffold_match_rate",
)


def route_of_value(value: str) -> Optional[Route]:
    """A generated current_city value as a canonical route (None for "-", empty or "from X to X")."""
    parsed = parse_current_city(value)
    if parsed is None:
        return None
    kind, start, end = parsed
    return (kind, canonical(start), canonical(end))


def route_of_leg(leg: ScaffoldDay) -> Route:
    """The canonical route a scaffold day expects."""
    return (leg.kind, canonical(leg.start), canonical(leg.end))


def _route_cities(route: Route) -> tuple[str, ...]:
    return (route[1], route[2]) if route[0] == "move" else (route[1],)


def compressed_route(routes: Sequence[Optional[Route]]) -> list[str]:
    """The cities visited in order, with consecutive repeats collapsed; unparsed days are skipped."""
    cities: list[str] = []
    for route in routes:
        if route is None:
            continue
        for city in _route_cities(route):
            if not cities or cities[-1] != city:
                cities.append(city)
    return cities


@dataclass(frozen=True)
class RouteScores:
    parse_rate: float
    continuity: float
    starts_at_origin: float
    closed_loop: float
    visiting_city_count: float
    allowed_city_rate: float
    no_revisit: float
    destination_reached: float
    scaffold_match_rate: float

    def components(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in ROUTE_COMPONENTS}

    @property
    def soft(self) -> float:
        return sum(self.components().values()) / len(ROUTE_COMPONENTS)

    @property
    def passed(self) -> bool:
        return all(value >= 1.0 for value in self.components().values())


def score_route(
    routes: Sequence[Optional[Route]],
    expected: Sequence[Route],
    origin: str,
    destination: str,
    allowed_cities: frozenset[str],
    visiting_city_number: int,
) -> RouteScores:
    """Score generated day routes against the origin, the catalog's cities and the expected scaffold.

    `origin` and `destination` are canonical; `destination` only has to be visited when it is one of
    the allowed (catalog) cities, because multi-city rows name a state there.
    """
    days = len(routes)
    if days == 0:
        return RouteScores(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    parsed_days = sum(route is not None for route in routes)

    running, continuous_days = origin, 0
    for route in routes:
        if route is not None and route[1] == running:
            continuous_days += 1
            running = route[2]
    continuity = continuous_days / days

    first, last = routes[0], routes[-1]
    starts_at_origin = first is not None and first[1] == origin
    closed_loop = last is not None and last[2] == origin and continuous_days == days

    cities = compressed_route(routes)
    distinct = set(cities)
    visited_others = {city for city in distinct if city != origin}
    allowed_rate = (
        sum(city in allowed_cities or city == origin for city in distinct) / len(distinct) if distinct else 0.0
    )
    interior = cities[1:-1]
    destination_known = destination in allowed_cities
    matched_days = sum(route == want for route, want in zip(routes, expected))

    return RouteScores(
        parse_rate=parsed_days / days,
        continuity=continuity,
        starts_at_origin=float(starts_at_origin),
        closed_loop=float(closed_loop),
        visiting_city_count=float(len(visited_others) == visiting_city_number),
        allowed_city_rate=allowed_rate,
        no_revisit=float(len(set(interior)) == len(interior)),
        destination_reached=float(destination in distinct) if destination_known else 1.0,
        scaffold_match_rate=matched_days / days,
    )
