"""The joint action of a centralized policy, and its deterministic split into the two role actions.

One joint action fills every (day, field) slot of the plan in canonical joint order (by day, then
PLAN_FIELDS order), as one JSON object without an agent id:
`{"assignments": [{"day": 1, "field": "current_city", "value": "..."}, ...]}`.

Only rewards and metrics split it: each assignment goes to the role that owns its field, in the
joint order, and each role's list is written as that role's action text (travel.task.roles.format_action
for strict items). The unchanged merger, evaluator and reward then score the two role actions. A text
that is not such an object (not JSON, other top-level keys, an item without a known field) is a failed
joint action: both role actions are empty, which the reward scores as two failed actions. What trains
is the joint token sequence itself, never a re-tokenised role split.
"""

from __future__ import annotations

import json
from typing import Any

from travel.task.fields import JOINT_ACTION, PLAN_FIELDS, ROLE_FIELDS, joint_slots, owner_of
from travel.task.roles import format_action

__all__ = [
    "CENTRALIZED_JOINT",
    "DECENTRALIZED",
    "FAILED_JOINT_ACTION",
    "JOINT_ACTION",
    "LAYOUT_KINDS",
    "format_joint_action",
    "joint_slots",
    "split_joint_action",
]

# What the trainable token sequences of one joint action are; preference batches and replay records carry it.
DECENTRALIZED = "decentralized"  # two role actors: one token sequence per role
CENTRALIZED_JOINT = "centralized_joint"  # one joint actor: one token sequence for both roles
LAYOUT_KINDS = (DECENTRALIZED, CENTRALIZED_JOINT)

FAILED_JOINT_ACTION: tuple[str, str] = ("", "")  # what an invalid joint action splits into


def format_joint_action(assignments) -> str:
    """The canonical joint action text for (day, field, value) triples, in the order given."""
    return format_action(JOINT_ACTION, assignments)


def _routed(item: Any) -> int | None:
    """The role owning an assignment item's field, or None when the item names no plan field."""
    if not isinstance(item, dict) or not isinstance(item.get("field"), str) or item["field"] not in PLAN_FIELDS:
        return None
    return owner_of(item["field"])


def split_joint_action(text: str) -> tuple[str, str]:
    """The (logistics, experience) action texts of a joint action; FAILED_JOINT_ACTION when it is invalid.
    Never raises on model text."""
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):
        return FAILED_JOINT_ACTION
    if not isinstance(payload, dict) or set(payload) != {"assignments"} or not isinstance(payload["assignments"], list):
        return FAILED_JOINT_ACTION
    per_role: list[list[Any]] = [[] for _ in ROLE_FIELDS]
    for item in payload["assignments"]:
        role = _routed(item)
        if role is None:
            return FAILED_JOINT_ACTION
        per_role[role].append(item)
    return tuple(  # type: ignore[return-value]
        json.dumps({"agent_id": role, "assignments": items}, ensure_ascii=False) for role, items in enumerate(per_role)
    )
