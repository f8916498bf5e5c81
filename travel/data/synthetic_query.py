"""The natural-language query of a synthetic row, phrased like the TravelPlanner queries it imitates:
the route, dates, party and budget, then one sentence per constraint, in random order."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any, Mapping


def _ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _joined(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" and {items[-1]}"


_HOUSE_RULE_TEXT = {
    "parties": "Our accommodations must allow parties.",
    "smoking": "We need accommodations where smoking is permitted.",
    "children under 10": "Our lodging options must accommodate children under the age of 10.",
    "visitors": "The accommodations should allow visitors.",
    "pets": "We'll be bringing our pets, so pet-friendly accommodations are a must.",
}
_ROOM_TYPE_TEXT = {
    "entire room": "We would like to rent entire rooms for our accommodations.",
    "private room": "We prefer private rooms for our stay.",
    "shared room": "Shared rooms are fine for our accommodations.",
    "not shared room": "We would rather not stay in shared rooms.",
}
_TRANSPORT_TEXT = {
    "no flight": "We would prefer not to take any flights.",
    "no self-driving": "We prefer non-self-driving transportation.",
}


def write_query(rng: random.Random, org: str, dest: str, dates: list[dt.date], people: int, budget: int,
                cities: int, constraint: Mapping[str, Any]) -> str:
    days = len(dates)
    span = f"{dates[0]:%B} {_ordinal(dates[0].day)} to {dates[-1]:%B} {_ordinal(dates[-1].day)}, 2022"
    party = rng.choice(("one person", "a single person", "an individual")) if people == 1 else rng.choice(
        (f"a group of {people}", f"{people} people", f"a party of {people}"))
    money = f"${budget:,}"
    if cities == 1:
        text = rng.choice((
            f"Please help me plan a trip from {org} to {dest} spanning {days} days from {span}. "
            f"The travel should be planned for {party} with a budget of {money}.",
            f"Please devise a travel plan that starts from {org} and heads to {dest}, taking place across {days} "
            f"days from {span}. This itinerary is for {party}, with a budget allocated at {money}.",
            f"Could you devise a {days}-day travel plan for {party} departing {org} and heading to {dest} "
            f"from {span}, with a budget of {money}?",
        ))
    else:
        text = rng.choice((
            f"Could you assist in crafting a travel itinerary for a {days}-day trip for {party}, departing from "
            f"{org} and touring {cities} cities in {dest}? The travel dates should range from {span}, and the "
            f"entire travel budget is {money}.",
            f"Could you organize a {days}-day travel plan leaving from {org} and visiting {cities} cities in "
            f"{dest} from {span}, for {party}? The budget for this trip is set at {money}.",
            f"We need a {days}-day travel plan for {party}, taking off from {org} and visiting {cities} different "
            f"cities in {dest} from {span}. Our budget is set at {money} for the trip.",
        ))
    extras = []
    if constraint["house rule"]:
        extras.append(_HOUSE_RULE_TEXT[constraint["house rule"]])
    if constraint["room type"]:
        extras.append(_ROOM_TYPE_TEXT[constraint["room type"]])
    if constraint["transportation"]:
        extras.append(_TRANSPORT_TEXT[constraint["transportation"]])
    if constraint["cuisine"]:
        cuisines = _joined(list(constraint["cuisine"]))
        extras.append(f"As for food, we would like to try {cuisines} cuisines during the trip.")
    rng.shuffle(extras)
    return " ".join([text, *extras])
