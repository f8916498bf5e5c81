"""Deterministic merger: the agents' parsed actions become one team plan (docs/task.md "Merger").

No LLM aggregates anything. Each agent's action is parsed with its own capacity; an over-capacity
action is dropped whole; valid slots proposed by one agent are accepted, identical proposals from
several agents are accepted once (counted as overlap), and differing proposals leave the slot empty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field as dataclass_field
from typing import Any, Sequence

from travel.data.text import canonical
from travel.task.actions import ParseResult, parse_assignments
from travel.task.fields import PLAN_FIELDS, Slot


@dataclass(frozen=True)
class MergeResult:
    plan: list[dict[str, Any]]  # D rows: {"day": d, <each PLAN_FIELD>: merged value or "-"}
    parsed: list[ParseResult]
    merged_assignments: dict[Slot, str]  # accepted team slots, in first-proposal order
    per_agent_assignments: list[dict[Slot, str]]  # each agent's accepted valid slots (first wins)
    conflict_slots: list[Slot]
    overlap_count: int
    self_duplicate_count: int
    invalid_slot_count: int
    extra_assignment_count: int
    capacity: int  # the largest per-agent capacity
    merged_sources: dict[Slot, int] = dataclass_field(default_factory=dict)  # slot -> agent whose value was kept


def _valid_triple(day: Any, field: Any, value: Any, days: int) -> tuple[Slot, str] | None:
    """((day, field), value) for a well-typed in-range triple; None marks an invalid slot."""
    if not isinstance(day, int) or isinstance(day, bool) or not 1 <= day <= days:
        return None
    if not isinstance(field, str) or field.lower() not in PLAN_FIELDS:
        return None
    if value is None:
        return (day, field.lower()), "-"
    if not isinstance(value, str):
        return None
    return (day, field.lower()), value.strip() or "-"


def _capacities(capacities: int | Sequence[int] | None, agents: int, days: int) -> list[int]:
    if capacities is None:
        return [math.ceil(len(PLAN_FIELDS) * days / max(1, agents))] * agents
    if isinstance(capacities, int):
        return [capacities] * agents
    values = [int(c) for c in capacities]
    if len(values) != agents:
        raise ValueError(f"got {len(values)} capacities for {agents} completions")
    return values


def merge_agent_assignments(
    completions: Sequence[Any],
    days: int,
    capacities: int | Sequence[int] | None = None,
) -> MergeResult:
    """Merge one joint action: completions[i] is agent i's action text. Never raises on the texts."""
    if days < 1:
        raise ValueError(f"days must be >= 1, got {days}")
    if isinstance(completions, (str, bytes)):
        completions = [completions]
    completions = list(completions)
    caps = _capacities(capacities, len(completions), days)

    parsed: list[ParseResult] = []
    per_agent: list[dict[Slot, str]] = []
    extra = invalid = self_duplicates = 0
    for agent_id, (text, capacity) in enumerate(zip(completions, caps)):
        result = parse_assignments(text, agent_id, capacity, days, PLAN_FIELDS)
        parsed.append(result)
        accepted: dict[Slot, str] = {}
        per_agent.append(accepted)
        if not result.capacity_valid:  # atomic: an over-capacity action contributes nothing
            extra += max(0, result.raw_item_count - capacity)
            continue
        invalid += result.invalid_item_count
        for day, field, value in result.assignments:
            checked = _valid_triple(day, field, value, days)
            if checked is None:
                invalid += 1
            elif checked[0] in accepted:
                self_duplicates += 1
            else:
                accepted[checked[0]] = checked[1]

    proposals: dict[Slot, list[tuple[int, str]]] = {}
    for agent_id, accepted in enumerate(per_agent):
        for slot, value in accepted.items():
            proposals.setdefault(slot, []).append((agent_id, value))

    merged: dict[Slot, str] = {}
    sources: dict[Slot, int] = {}
    conflicts: list[Slot] = []
    overlaps = 0
    for slot, offers in proposals.items():
        if len(offers) > 1 and len({canonical(value) for _, value in offers}) > 1:
            conflicts.append(slot)
            continue
        overlaps += len(offers) - 1
        sources[slot], merged[slot] = offers[0]

    plan = [
        {"day": day, **{field: merged.get((day, field), "-") for field in PLAN_FIELDS}}
        for day in range(1, days + 1)
    ]
    return MergeResult(
        plan=plan,
        parsed=parsed,
        merged_assignments=merged,
        per_agent_assignments=per_agent,
        conflict_slots=conflicts,
        overlap_count=overlaps,
        self_duplicate_count=self_duplicates,
        invalid_slot_count=invalid,
        extra_assignment_count=extra,
        capacity=max(caps, default=0),
        merged_sources=sources,
    )
