"""Per-role day-slot checklist and hard-constraint duty, both derived only from the shared scaffold.

The checklist marks every owned slot of every day as EXACT, REQUIRED or EMPTY using the same
required-slot rules the evaluator applies, so an agent knows before acting what its teammate
cannot fill for it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from travel.task.fields import LOGISTICS
from travel.task.role_catalog import quoted
from travel.task.role_eligibility import checked_scaffold, hard_requirements, per_row_cache

if TYPE_CHECKING:
    from travel.data.row import TravelRow
    from travel.data.scaffold import ScaffoldDay


def _logistics_day(leg: "ScaffoldDay", last_day: int) -> str:
    parts = [f"current_city=EXACT {quoted(leg.current_city)}"]
    if leg.kind == "move":
        parts.append(
            f"transportation=REQUIRED: one eligible=yes TRANSPORTATION option whose days include {leg.day}, "
            "copied exactly"
        )
    else:
        parts.append('transportation=EMPTY: use "-"')
    if leg.day == last_day:
        parts.append('accommodation=EMPTY: use "-" (final return day)')
    else:
        parts.append(f"accommodation=REQUIRED: one eligible=yes ACCOMMODATION option whose days include {leg.day}")
    return f"day={leg.day}: " + "; ".join(parts)


def _experience_day(leg: "ScaffoldDay") -> str:
    if leg.kind == "move":
        return f'day={leg.day}: breakfast, attraction, lunch, dinner are EMPTY; use "-" for all four'
    return (
        f"day={leg.day}: breakfast, lunch, and dinner are REQUIRED distinct eligible=yes restaurants whose days "
        f"include {leg.day}; attraction is REQUIRED as exactly one eligible=yes attraction whose days include {leg.day}"
    )


@per_row_cache
def day_checklist_lines(row: "TravelRow", agent_id: int) -> tuple[str, ...]:
    lines = ["ROLE DAY-SLOT CHECKLIST (derived only from the shared scaffold):"]
    for leg in checked_scaffold(row):
        lines.append(_logistics_day(leg, row.days) if agent_id == LOGISTICS else _experience_day(leg))
    return tuple(lines)


def _requirement_text(value: object) -> str:
    return "none" if value is None else json.dumps(value, ensure_ascii=False)


@per_row_cache
def hard_duty_lines(row: "TravelRow", agent_id: int) -> tuple[str, ...]:
    requirements = hard_requirements(row)
    lines = ["ROLE-SPECIFIC HARD-CONSTRAINT DUTY:"]
    if agent_id == LOGISTICS:
        lines += [
            f"Requested room type={_requirement_text(requirements.room_type)}; "
            f"house rule={_requirement_text(requirements.house_rule)}; "
            f"transportation rule={_requirement_text(requirements.transportation)}",
            "- Use only eligible=yes transportation and accommodation options, and only on a day their days list "
            "includes.",
            "- Eligibility already guarantees that the lodging's minimum stay is reachable within its consecutive "
            "city run; reuse one lodging across the whole run when its min_nights needs it.",
            "- The room-type and house-rule requirements apply to every lodging night you select.",
            "- Never mix self-driving with flight or taxi legs in one itinerary.",
        ]
    else:
        coverage = json.dumps(list(requirements.cuisines), ensure_ascii=False) if requirements.cuisines else "none"
        lines += [
            f"Requested cuisine coverage={coverage}",
            "- The union of cuisines over your required meals must include every requested cuisine; restaurants "
            "without a requested cuisine remain eligible for the other meals.",
            "- Use a distinct restaurant for every meal and a distinct single attraction for every stay day.",
            "- Put exactly one attraction in each attraction slot: never output multiple attractions in one slot "
            "and never join values with ';'.",
        ]
    return tuple(lines)
