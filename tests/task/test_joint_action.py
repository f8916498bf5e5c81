"""The joint action of a centralized policy: its format, its split into the two role actions, its reward."""

import json

import pytest

from tests.fixtures import all_dash_action_text, five_day_fixture_row, fixture_row, role_action_text, valid_plan_values
from travel.reward import score_joint_action
from travel.task.fields import JOINT_ACTION, joint_slots
from travel.task.joint_action import FAILED_JOINT_ACTION, format_joint_action, split_joint_action
from travel.task.roles import action_skeleton, assistant_prefill


def joint_text(plan, days):
    by_day = {entry["day"]: entry for entry in plan}
    return format_joint_action([(day, field, by_day[day][field]) for day, field in joint_slots(days)])


@pytest.mark.parametrize("make_row", [fixture_row, five_day_fixture_row])
def test_the_split_equals_the_role_actions_written_separately_and_gets_their_reward(make_row):
    row = make_row()
    plan = valid_plan_values(row)
    separate = [role_action_text(agent, plan, row.days) for agent in (0, 1)]
    split = split_joint_action(joint_text(plan, row.days))
    assert list(split) == separate
    joint_result, separate_result = score_joint_action(row, list(split)), score_joint_action(row, separate)
    assert joint_result.reward == separate_result.reward > 0.5
    assert joint_result.metrics == separate_result.metrics


def test_an_all_dash_joint_action_splits_into_the_two_all_dash_role_actions():
    row = fixture_row()
    dash = format_joint_action([(day, field, "-") for day, field in joint_slots(row.days)])
    assert list(split_joint_action(dash)) == [all_dash_action_text(agent, row.days) for agent in (0, 1)]
    assert score_joint_action(row, list(split_joint_action(dash))).reward == pytest.approx(0.08)


def test_the_joint_skeleton_has_every_slot_in_canonical_order_and_no_agent_id():
    prefix, suffixes = action_skeleton(JOINT_ACTION, joint_slots(3))
    assert prefix == assistant_prefill(JOINT_ACTION) == '{"assignments": [{"day": 1, "field": "current_city", "value": "'
    assert len(suffixes) == 21 and suffixes[-1] == "}]}"
    values = [f"v{k}" for k in range(21)]
    text = prefix + "".join(value + '"' + suffix for value, suffix in zip(values, suffixes))
    assert json.loads(text) == {
        "assignments": [{"day": d, "field": f, "value": v} for (d, f), v in zip(joint_slots(3), values)]
    }


INVALID = [
    "",
    "not json",
    '{"assignments": [{"day": 1, "field": "current_city", "value": "Alpha"}',  # unclosed
    '{"agent_id": 0, "assignments": []}',  # a role action's keys
    '{"assignments": {"day": 1}}',
    '{"assignments": [{"day": 1, "field": "souvenir", "value": "x"}]}',  # no role owns the field
    '{"assignments": [["day", 1]]}',
    "[" * 5000,  # deep nesting
]


@pytest.mark.parametrize("text", INVALID)
def test_invalid_joint_json_is_a_failed_action_and_never_crashes_the_reward(text):
    row = fixture_row()
    assert split_joint_action(text) == FAILED_JOINT_ACTION
    result = score_joint_action(row, list(split_joint_action(text)))
    assert result.reward == score_joint_action(row, ["", ""]).reward
    assert result.reward <= 0.05  # two failed actions earn at most the early learning channels
    assert result.metrics["team_action_success"] == 0.0


def test_items_keep_the_joint_order_and_role_errors_stay_visible_to_the_parser():
    row = fixture_row()
    plan = valid_plan_values(row)
    payload = json.loads(joint_text(plan, row.days))
    payload["assignments"][0]["extra"] = 1  # a non-strict item is routed, and the role parser flags it
    logistics, experience = split_joint_action(json.dumps(payload))
    assert json.loads(logistics)["assignments"][0] == {"day": 1, "field": "current_city", "value": plan[0]["current_city"], "extra": 1}
    assert experience == role_action_text(1, plan, row.days)
    assert score_joint_action(row, [logistics, experience]).reward < score_joint_action(row, list(split_joint_action(joint_text(plan, row.days)))).reward
