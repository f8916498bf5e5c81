"""The joint prompt of a centralized policy: both role contexts in one user message, one assistant prefill.

It holds what the two role prompts hold (travel/task/prompts.py), once per role where it is role-specific:
the scaffold, both role catalogs, both day checklists and hard duties, and the budget contract with both
caps. The output contract asks for one joint action (travel/task/joint_action.py) over every slot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from travel.task.budget_contract import budget_contract_lines
from travel.task.fields import JOINT_ACTION, PLAN_FIELDS, ROLE_FIELDS, joint_slots
from travel.task.role_catalog import role_catalog_lines, scaffold_lines
from travel.task.role_checklist import day_checklist_lines, hard_duty_lines
from travel.task.role_eligibility import per_row_cache
from travel.task.roles import ROLES, assistant_prefill
from travel.task.prompts import PLAN_RULES, RolePrompt, structured_constraints

if TYPE_CHECKING:
    from travel.data.row import TravelRow

JOINT_SYSTEM_PROMPT = (
    "You are the single planner of a two-role travel-planning team and write both roles' assignments. "
    "Follow the role guidance and the output contract in the user message exactly. "
    "Return only the JSON object, with no prose before or after it. "
    "Always close the assignments array with ] before the final }."
)


def build_joint_prompt(row: "TravelRow", *, system_prompt: Optional[str] = None) -> RolePrompt:
    """The system text, user text and assistant prefill of the joint policy for one row."""
    return RolePrompt(
        agent_id=JOINT_ACTION,
        system=JOINT_SYSTEM_PROMPT if system_prompt is None else system_prompt,
        user=_joint_user_message(row),
        prefill=assistant_prefill(JOINT_ACTION),
    )


def _role_section(row: "TravelRow", agent_id: int) -> str:
    role = ROLES[agent_id]
    lines = [
        f"ROLE {agent_id}: {role.title} (fields {', '.join(role.fields)})",
        *day_checklist_lines(row, agent_id),
        *hard_duty_lines(row, agent_id),
        *budget_contract_lines(row, agent_id),
        *role_catalog_lines(row, agent_id),
    ]
    return "\n".join(lines)


@per_row_cache
def _joint_user_message(row: "TravelRow") -> str:
    days, total = row.days, len(joint_slots(row.days))
    sections = [
        "You plan one trip alone, for a team of two roles: LOGISTICS (route, transportation between cities, "
        "accommodation) and EXPERIENCE (meals and attractions). You write every assignment of both roles in one "
        "JSON object; the roles' assignments are merged into one itinerary and scored together.",
        "YOUR SLOTS: every (day, field) of the itinerary, by day, in the field order " + ", ".join(PLAN_FIELDS),
        "PLANNING RULES:\n"
        + "\n".join(
            [f"- The itinerary has {total} slots ({days} days x {len(PLAN_FIELDS)} fields); submit exactly one "
             "assignment per slot.", *PLAN_RULES[:-1]]
        ),
        "VALID FIELDS: " + ", ".join(PLAN_FIELDS),
        "TRIP REQUEST:\n" + row.query,
        structured_constraints(row),
        "REFERENCE-DERIVED PLANNING CONTEXT:\n" + "\n".join(scaffold_lines(row)),
        *(_role_section(row, agent_id) for agent_id in range(len(ROLE_FIELDS))),
        _joint_output_contract(total),
    ]
    return "\n\n".join(sections)


def _joint_output_contract(total: int) -> str:
    return "\n".join(
        [
            "STRICT OUTPUT CONTRACT:",
            "- Output exactly one JSON object: no Markdown fence, no prose, no second object.",
            '- The object has exactly the key "assignments".',
            f'- "assignments" must contain exactly {total} objects, one per slot in the YOUR SLOTS order.',
            '- Each assignment object has exactly the keys "day" (integer), "field" (string) and "value" (string).',
            "- Values are real catalog values or \"-\"; never placeholder text.",
            "- GENERATION CONTRACT: the ASSISTANT PREFILL below is already written at the start of your answer; do "
            "not repeat it. It ends right after the opening quote of the first value.",
            "- Generate only the value text and its closing quote. The system then supplies every following fixed "
            "part of the assignment objects in slot order, and you continue inside the next already-open value "
            "string. Each value has a token limit.",
            f"ASSISTANT PREFILL: {assistant_prefill(JOINT_ACTION)}",
        ]
    )
