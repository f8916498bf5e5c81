"""A controlled learning task with a known optimum, for the end-to-end learning tests.

Rows: copies of the 3-day fixture trip (tests/fixtures.py), written to a local jsonl. Score: a plain
function through the reward seam that pays 0.5 when agent 0 writes TARGET_ACCOMMODATION on day 2 and
0.5 when agent 1 writes TARGET_ATTRACTION on day 2, whatever else the actions say; every other metric is
the task reward's. Under generation.values=catalog each of those slots has a handful of admitted values,
so the optimum (1.0) is one joint choice among nine, and greedy evaluation finds it exactly
when both policies prefer their target.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tests.fixtures import fixture_raw
from travel.task.actions import parse_assignments
from travel.task.roles import role_capacity

TARGET_DAY = 2
TARGET_ACCOMMODATION = "Motel, Beta"
TARGET_ATTRACTION = "Park, Beta"
OPTIMUM = 1.0


def write_rows(path: Path, count: int = 4) -> Path:
    """`count` 3-day easy rows that differ only in their budget, which their query states (so each is its own
    query: identical queries load as one row)."""
    with path.open("w") as handle:
        for index in range(count):
            raw = fixture_raw(budget=1000 + 100 * index)
            raw["query"] = raw["query"].replace("$1,000", f"${1000 + 100 * index:,}")
            handle.write(json.dumps(raw) + "\n")
    return path


def slot_value(text: str, agent_id: int, days: int, field: str) -> str | None:
    parsed = parse_assignments(text, agent_id, role_capacity(agent_id, days), days)
    for day, name, value in parsed.assignments if parsed.parse_success else ():
        if day == TARGET_DAY and name == field:
            return value
    return None


def target_reward(row, pair) -> float:
    logistics, experience = pair
    return 0.5 * (slot_value(logistics, 0, row.days, "accommodation") == TARGET_ACCOMMODATION) + 0.5 * (
        slot_value(experience, 1, row.days, "attraction") == TARGET_ATTRACTION
    )


def target_score(row, pairs, config=None):
    """The reward seam's score function: the task reward's metrics, the controlled reward."""
    from travel.reward import score_joint_actions

    scored = []
    for result, pair in zip(score_joint_actions(row, pairs, config), pairs):
        reward = target_reward(row, pair)
        scored.append(dataclasses.replace(result, reward=reward, metrics={**result.metrics, "reward": reward}))
    return scored
