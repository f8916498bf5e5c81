"""Roles, capacities, slot ownership, the action schema, serialisation and the assistant prefill."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fixtures import all_dash_action_text, fixture_row, role_action_text, valid_plan_values
from travel.task.actions import ITEM_KEYS, TOP_LEVEL_KEYS, parse_assignments
from travel.task.fields import PLAN_FIELDS, owned_slots, owner_of
from travel.task.roles import (
    ACTION_SCHEMA,
    EXPERIENCE,
    LOGISTICS,
    ROLES,
    action_skeleton,
    assistant_prefill,
    format_action,
    role_capacities,
    role_capacity,
)


@given(st.integers(min_value=1, max_value=10))
def test_ownership_is_disjoint_and_exhaustive(days):
    logistics, experience = set(owned_slots(LOGISTICS, days)), set(owned_slots(EXPERIENCE, days))
    every_slot = {(day, field) for day in range(1, days + 1) for field in PLAN_FIELDS}
    assert logistics.isdisjoint(experience)
    assert logistics | experience == every_slot
    assert len(logistics) == 3 * days and len(experience) == 4 * days
    assert all(owner_of(field) == agent for agent, slots in ((0, logistics), (1, experience)) for _, field in slots)
    assert ((days, "dinner") in experience) and ((days, "accommodation") in logistics)


def test_owned_slots_follow_day_then_plan_field_order():
    assert owned_slots(LOGISTICS, 2) == (
        (1, "current_city"), (1, "transportation"), (1, "accommodation"),
        (2, "current_city"), (2, "transportation"), (2, "accommodation"),
    )
    assert owned_slots(EXPERIENCE, 1) == ((1, "breakfast"), (1, "attraction"), (1, "lunch"), (1, "dinner"))


@pytest.mark.parametrize("days, logistics, experience", [(1, 3, 4), (3, 9, 12), (5, 15, 20), (7, 21, 28)])
def test_role_capacity_is_the_owned_count(days, logistics, experience):
    assert role_capacity(LOGISTICS, days) == logistics
    assert role_capacity(EXPERIENCE, days) == experience
    assert role_capacities(days) == [logistics, experience]
    assert ROLES[LOGISTICS].capacity(days) == len(ROLES[LOGISTICS].owned_slots(days))


@pytest.mark.parametrize("days, agents, expected", [(3, 2, 11), (5, 2, 18), (3, 3, 7), (1, 1, 7), (2, 4, 4)])
def test_capacity_without_a_role_is_ceil_of_seven_days_over_agents(days, agents, expected):
    assert role_capacity(None, days, num_agents=agents) == expected


@pytest.mark.parametrize("agent_id, days", [(2, 3), (-1, 3), (0, 0)])
def test_role_capacity_rejects_unknown_roles_and_empty_trips(agent_id, days):
    with pytest.raises(ValueError):
        role_capacity(agent_id, days)


def test_roles_name_their_prompt_titles_and_fields():
    assert [role.name for role in ROLES] == ["LOGISTICS", "EXPERIENCE"]
    assert [role.title for role in ROLES] == ["LOGISTICS AND FEASIBILITY", "DAILY EXPERIENCE"]
    assert ROLES[LOGISTICS].fields == ("current_city", "transportation", "accommodation")
    assert ROLES[EXPERIENCE].fields == ("breakfast", "attraction", "lunch", "dinner")
    for role in ROLES:
        assert role.title in role.guidance
        assert all(field in role.guidance for field in PLAN_FIELDS)  # own fields and the other role's
        assert "annotated" not in role.guidance.casefold() and "gold" not in role.guidance.casefold()


def test_prefill_strings_are_exact():
    assert assistant_prefill(0) == '{"agent_id": 0, "assignments": [{"day": 1, "field": "current_city", "value": "'
    assert assistant_prefill(1) == '{"agent_id": 1, "assignments": [{"day": 1, "field": "breakfast", "value": "'


def test_format_action_matches_the_fixture_serialisation_for_ascii_values():
    row = fixture_row()
    plan = valid_plan_values(row)
    for agent_id in (0, 1):
        triples = [(day, field, plan[day - 1][field]) for day, field in owned_slots(agent_id, 3)]
        assert format_action(agent_id, triples) == role_action_text(agent_id, plan, 3)
        dashes = [(day, field, "-") for day, field in owned_slots(agent_id, 3)]
        assert format_action(agent_id, dashes) == all_dash_action_text(agent_id, 3)


def test_format_action_keeps_non_ascii_and_escapes_what_json_must():
    text = format_action(1, [(1, "breakfast", 'Café "Zürich"\n, Beta')])
    assert "Café" in text and "Zürich" in text and "\\u00e9" not in text
    assert json.loads(text) == {
        "agent_id": 1,
        "assignments": [{"day": 1, "field": "breakfast", "value": 'Café "Zürich"\n, Beta'}],
    }
    assert parse_assignments(text, 1, 4, 1).parse_success


@given(
    st.lists(
        st.text(alphabet=st.characters(blacklist_characters='"\\', blacklist_categories=("Cc", "Cs")), max_size=12),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from([0, 1]),
)
def test_skeleton_and_values_concatenate_to_the_formatted_action(values, agent_id):
    slots = owned_slots(agent_id, 2)[: len(values)]
    values = values[: len(slots)]
    prefix, suffixes = action_skeleton(agent_id, slots)
    assembled = prefix + "".join(value + '"' + suffix for value, suffix in zip(values, suffixes))
    assert assembled == format_action(agent_id, [(d, f, v) for (d, f), v in zip(slots, values)])
    assert suffixes[-1] == "}]}"
    assert prefix == assistant_prefill(agent_id)


def test_skeleton_suffix_opens_the_next_value():
    _, suffixes = action_skeleton(0, owned_slots(0, 2)[2:4])
    assert suffixes == ('}, {"day": 2, "field": "current_city", "value": "', "}]}")
    with pytest.raises(ValueError):
        action_skeleton(0, [])


def test_schema_documents_what_the_parser_accepts_strictly():
    assert set(ACTION_SCHEMA["required"]) == TOP_LEVEL_KEYS == set(ACTION_SCHEMA["properties"])
    assert ACTION_SCHEMA["additionalProperties"] is False
    item = ACTION_SCHEMA["properties"]["assignments"]["items"]
    assert set(item["required"]) == ITEM_KEYS == set(item["properties"])
    assert item["properties"]["field"]["enum"] == list(PLAN_FIELDS)
    assert item["properties"]["day"]["type"] == "integer"
    assert ACTION_SCHEMA["properties"]["agent_id"]["enum"] == [0, 1]
    json.dumps(ACTION_SCHEMA)  # documentation must itself be serialisable
