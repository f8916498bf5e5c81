"""The two roles: their descriptions, capacities, the action JSON schema and its one serialisation.

`format_action` is the single source of the action text. The assistant prefill and the forced JSON
skeleton of the structured decoder are cut out of its output, so prompts, decoder and tests cannot
drift apart. Serialisation is `json.dumps` with the default separators (", ", ": ") and
`ensure_ascii=False`: a model writes non-ASCII characters of a value directly, so the decoded text of
a generated action equals `format_action` of its values.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from travel.task.fields import (
    EXPERIENCE,
    JOINT_ACTION,
    LOGISTICS,
    PLAN_FIELDS,
    ROLE_FIELDS,
    ROLE_NAMES,
    Slot,
    action_slots,
    owned_slots,
)

__all__ = [
    "ACTION_SCHEMA",
    "EXPERIENCE",
    "LOGISTICS",
    "ROLES",
    "Role",
    "action_skeleton",
    "assistant_prefill",
    "format_action",
    "role_capacities",
    "role_capacity",
]


@dataclass(frozen=True)
class Role:
    agent_id: int
    name: str  # LOGISTICS | EXPERIENCE: the YOUR_ROLE token of the budget contract
    title: str  # the heading used in prompts
    fields: tuple[str, ...]
    guidance: str

    def owned_slots(self, days: int) -> tuple[Slot, ...]:
        return owned_slots(self.agent_id, days)

    def capacity(self, days: int) -> int:
        return len(self.fields) * days


def _guidance(title: str, own: Sequence[str], other: Sequence[str], purpose: str) -> str:
    return (
        f"You are {title}. You own {', '.join(own)} on every day of the trip; {purpose} "
        f"Submit exactly one assignment for every owned (day, field) slot, using \"-\" where the itinerary "
        f"convention leaves a slot empty. Do not submit {', '.join(other)}: the other agent owns those fields."
    )


ROLES: tuple[Role, ...] = (
    Role(
        agent_id=LOGISTICS,
        name=ROLE_NAMES[LOGISTICS],
        title="LOGISTICS AND FEASIBILITY",
        fields=ROLE_FIELDS[LOGISTICS],
        guidance=_guidance(
            "LOGISTICS AND FEASIBILITY",
            ROLE_FIELDS[LOGISTICS],
            ROLE_FIELDS[EXPERIENCE],
            "you decide the route, how the team travels between cities and where it sleeps.",
        ),
    ),
    Role(
        agent_id=EXPERIENCE,
        name=ROLE_NAMES[EXPERIENCE],
        title="DAILY EXPERIENCE",
        fields=ROLE_FIELDS[EXPERIENCE],
        guidance=_guidance(
            "DAILY EXPERIENCE",
            ROLE_FIELDS[EXPERIENCE],
            ROLE_FIELDS[LOGISTICS],
            "you decide where the team eats and what it visits on each stay day.",
        ),
    ),
)


def role_capacity(agent_id: int | None, days: int, num_agents: int = 2) -> int:
    """Most assignments an action may hold: the role's owned count (3D / 4D), else ceil(7D / num_agents)."""
    if days < 1:
        raise ValueError(f"days must be >= 1, got {days}")
    if agent_id is None:
        if num_agents < 1:
            raise ValueError(f"num_agents must be >= 1, got {num_agents}")
        return math.ceil(len(PLAN_FIELDS) * days / num_agents)
    if agent_id not in (LOGISTICS, EXPERIENCE):
        raise ValueError(f"unknown agent_id {agent_id!r}; roles are 0 (logistics) and 1 (experience)")
    return ROLES[agent_id].capacity(days)


def role_capacities(days: int) -> list[int]:
    """Capacities in agent order, as the evaluator passes them to the merger: [3D, 4D]."""
    return [role_capacity(role.agent_id, days) for role in ROLES]


ACTION_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Travel role action",
    "type": "object",
    "additionalProperties": False,
    "required": ["agent_id", "assignments"],
    "properties": {
        "agent_id": {"type": "integer", "enum": [role.agent_id for role in ROLES]},
        "assignments": {
            "type": "array",
            "description": "One object per owned (day, field) slot in canonical order; \"-\" marks an empty slot.",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["day", "field", "value"],
                "properties": {
                    "day": {"type": "integer", "minimum": 1},
                    "field": {"type": "string", "enum": list(PLAN_FIELDS)},
                    "value": {"type": "string", "minLength": 1, "pattern": r"\S"},
                },
            },
        },
    },
}


def format_action(agent_id: int, assignments: Iterable[tuple[int, str, str]]) -> str:
    """The canonical action text for (day, field, value) triples, in the order given. A joint action
    (agent_id JOINT_ACTION) has no agent_id key: `{"assignments": [...]}`."""
    items = [{"day": int(day), "field": str(field), "value": str(value)} for day, field, value in assignments]
    if agent_id == JOINT_ACTION:
        return json.dumps({"assignments": items}, ensure_ascii=False)
    return json.dumps({"agent_id": int(agent_id), "assignments": items}, ensure_ascii=False)


_VALUE_MARK = "@@VALUE@@"


def action_skeleton(agent_id: int, slots: Sequence[Slot]) -> tuple[str, tuple[str, ...]]:
    """The fixed text around the values of an action over `slots`.

    Returns (prefix, suffixes): prefix ends just inside the first value's opening quote; suffixes[k]
    follows the closing quote of value k (the next object's keys up to its open value, or `}]}`).
    So prefix + v0 + '"' + suffixes[0] + v1 + '"' + ... == format_action(agent_id, slots with values)
    for any values that need no JSON escaping.
    """
    if not slots:
        raise ValueError("an action skeleton needs at least one slot")
    marked = format_action(agent_id, [(day, field, _VALUE_MARK) for day, field in slots])
    pieces = marked.split(_VALUE_MARK + '"')
    if len(pieces) != len(slots) + 1:
        raise ValueError(f"field names of {slots!r} break the action skeleton")
    return pieces[0], tuple(pieces[1:])


def assistant_prefill(agent_id: int) -> str:
    """The text the assistant turn starts with: the action up to inside the first value's opening quote.

    It does not depend on the trip length because every action's first slot is on day 1.
    """
    first_slot = action_slots(agent_id, 1)[0]
    prefix, _ = action_skeleton(agent_id, [first_slot])
    return prefix
