"""Every synthetic row is solvable: its generator-internal feasible plan, written as the two role actions,
earns the maximum reward, and breaking the plan in any one way earns strictly less."""

import dataclasses

import pytest

from travel.data.normalise import normalise_row
from travel.data.synthetic import SyntheticSource
from travel.reward import score_joint_action
from travel.task.fields import owned_slots
from travel.task.roles import format_action

SOURCE = SyntheticSource(seed=0)


def actions(plan, days):
    by_day = {day: plan[day - 1] for day in range(1, days + 1)}
    return [format_action(a, [(d, f, by_day[d][f]) for d, f in owned_slots(a, days)]) for a in (0, 1)]


@pytest.fixture(scope="module")
def rows_and_plans():
    raws = SOURCE.load_raw()
    return [(normalise_row(raw, index), plan) for index, (raw, plan) in enumerate(zip(raws, SOURCE.feasible_plans()))]


def test_every_feasible_plan_scores_exactly_one(rows_and_plans):
    for row, plan in rows_and_plans:
        result = score_joint_action(row, actions(plan, row.days))
        assert result.reward == 1.0, (row.source_index, result.reward)
        assert result.metrics["reference_plan_success"] == 1.0
        assert result.metrics["collaboration_success"] == 1.0


def required_slot(row):
    """A required meal or accommodation slot (first in canonical order), or the first transport."""
    for day, field in sorted(row.required_slots):
        if field in ("breakfast", "accommodation", "transportation"):
            return day, field
    raise AssertionError(f"row {row.source_index} has no required cost slot")


def test_breaking_the_plan_scores_strictly_less(rows_and_plans):
    for row, plan in rows_and_plans:
        day, field = required_slot(row)
        emptied = [dict(entry) for entry in plan]
        emptied[day - 1][field] = "-"
        renamed = [dict(entry) for entry in plan]
        renamed[day - 1][field] = "Nowhere In Particular, " + row.scaffold[day - 1].end
        full = score_joint_action(row, actions(plan, row.days))
        cost = full.metrics["estimated_cost"]
        poorer = dataclasses.replace(row, budget=cost * 0.9)
        for label, candidate_row, candidate_plan in (
            ("emptied", row, emptied),
            ("renamed", row, renamed),
            ("budget cut", poorer, plan),
        ):
            reward = score_joint_action(candidate_row, actions(candidate_plan, row.days)).reward
            assert reward < 1.0, (row.source_index, label, reward)
