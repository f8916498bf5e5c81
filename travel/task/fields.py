"""Plan fields, the two roles and which (day, field) slots each role owns.

This module has no imports from the rest of the package so that data, task and reward code can all
depend on it.
"""

from __future__ import annotations

PLAN_FIELDS: tuple[str, ...] = (
    "current_city",
    "transportation",
    "breakfast",
    "attraction",
    "lunch",
    "dinner",
    "accommodation",
)
LOGISTICS, EXPERIENCE = 0, 1
# The agent id of a joint action: one centralized policy writes every slot of both roles in one object
# (travel/task/joint_action.py). It never reaches the reward, which sees the two role actions split from it.
JOINT_ACTION = -1
ROLE_NAMES: tuple[str, ...] = ("LOGISTICS", "EXPERIENCE")
ROLE_FIELDS: tuple[tuple[str, ...], ...] = (
    ("current_city", "transportation", "accommodation"),
    ("breakfast", "attraction", "lunch", "dinner"),
)
MEAL_FIELDS: tuple[str, ...] = ("breakfast", "lunch", "dinner")
COST_FIELDS: frozenset[str] = frozenset({"transportation", "breakfast", "lunch", "dinner", "accommodation"})

Slot = tuple[int, str]  # (day, field), days count from 1


def owned_slots(agent_id: int, days: int) -> tuple[Slot, ...]:
    """The slots a role owns, in canonical order: by day, then PLAN_FIELDS order within the role."""
    fields = ROLE_FIELDS[agent_id]
    return tuple((day, field) for day in range(1, days + 1) for field in fields)


def joint_slots(days: int) -> tuple[Slot, ...]:
    """Every slot of the plan in canonical joint order: by day, then PLAN_FIELDS order."""
    return tuple((day, field) for day in range(1, days + 1) for field in PLAN_FIELDS)


def action_slots(agent_id: int, days: int) -> tuple[Slot, ...]:
    """The slots an action of `agent_id` fills: a role's owned slots, or every slot for JOINT_ACTION."""
    return joint_slots(days) if agent_id == JOINT_ACTION else owned_slots(agent_id, days)


def owner_of(field: str) -> int:
    """The role that owns a field (raises KeyError for an unknown field)."""
    for agent_id, fields in enumerate(ROLE_FIELDS):
        if field in fields:
            return agent_id
    raise KeyError(f"unknown plan field {field!r}; expected one of {', '.join(PLAN_FIELDS)}")
