"""Role prompts: the system message, the full user message of each agent and its assistant prefill.

The user message reads only the request (query, origin, destination, days, dates, people, budget,
local constraints) and what is derived from the reference catalog: scaffold, required slots,
compact role catalog, day checklist and budget contract. Human plans never reach it. Rendering
through a chat template happens in travel/generation; this module produces text only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from travel.task.budget_contract import budget_contract_lines
from travel.task.fields import PLAN_FIELDS, ROLE_FIELDS, owned_slots
from travel.task.role_catalog import compact_context_lines
from travel.task.role_checklist import day_checklist_lines, hard_duty_lines
from travel.task.role_eligibility import per_row_cache
from travel.task.roles import ROLES, assistant_prefill

if TYPE_CHECKING:
    from travel.data.row import TravelRow

NUM_AGENTS = 2

DEFAULT_SYSTEM_PROMPT = (
    "You are one agent in a decentralized team of travel-planning agents. "
    "Follow your role guidance and the output contract in the user message exactly. "
    "Return only the JSON object, with no prose before or after it. "
    "Always close the assignments array with ] before the final }."
)


@dataclass(frozen=True)
class RolePrompt:
    agent_id: int
    system: str  # "" when no system message is sent
    user: str
    prefill: str  # "" when generation starts with the whole object


def build_role_prompt(
    row: "TravelRow", agent_id: int, *, system_prompt: Optional[str] = None, use_prefill: bool = True
) -> RolePrompt:
    """The system text, user text and assistant prefill of one agent for one row."""
    if agent_id not in range(NUM_AGENTS):
        raise ValueError(f"unknown agent_id {agent_id!r}; roles are 0 (logistics) and 1 (experience)")
    return RolePrompt(
        agent_id=agent_id,
        system=DEFAULT_SYSTEM_PROMPT if system_prompt is None else system_prompt,
        user=_user_message(row, agent_id, use_prefill),
        prefill=assistant_prefill(agent_id) if use_prefill else "",
    )


@per_row_cache
def _user_message(row: "TravelRow", agent_id: int, use_prefill: bool) -> str:
    sections = [
        _identity(agent_id),
        "ROLE GUIDANCE:\n" + ROLES[agent_id].guidance,
        "YOUR OWNED SLOTS: " + ", ".join(f"(day {day}, {field})" for day, field in owned_slots(agent_id, row.days)),
        "\n".join(day_checklist_lines(row, agent_id)),
        "\n".join(hard_duty_lines(row, agent_id)),
        "\n".join(budget_contract_lines(row, agent_id)),
        _collaboration_rules(row.days, agent_id),
        "VALID FIELDS: " + ", ".join(PLAN_FIELDS),
        "TRIP REQUEST:\n" + row.query,
        structured_constraints(row),
        "REFERENCE-DERIVED PLANNING CONTEXT:\n" + "\n".join(compact_context_lines(row, agent_id)),
        _output_contract(row.days, agent_id, use_prefill),
    ]
    return "\n\n".join(sections)


def _identity(agent_id: int) -> str:
    return (
        f"You are Agent {agent_id} of {NUM_AGENTS} agents planning one trip together. Every agent receives the same "
        "travel request, constraints and route scaffold, and all agents act simultaneously: you cannot communicate "
        "with your teammate or see its answer. A deterministic merger combines the agents' assignments into one team "
        "itinerary, and every agent receives the identical shared reward for that itinerary."
    )


PLAN_RULES: tuple[str, ...] = (
    '- An explicit "-" means the slot is intentionally empty; omitting an owned slot is an error.',
    '- current_city is "from A to B" on a travel day and a single city name on a stay day.',
    '- A travel day needs the matching transportation; a stay day uses "-" for transportation.',
    "- A stay day needs breakfast, lunch, dinner and one attraction; on travel days they may be \"-\".",
    "- Accommodation is required on every day except the final return day.",
    "- The route starts and ends at the origin and visits the requested number of cities.",
    '- Never use "-" merely because you are uncertain when the checklist marks a slot REQUIRED.',
    "- Use only entities from the provided catalog and invent nothing; write restaurants, attractions and "
    'accommodations as "Name, City" exactly as listed, and exactly one attraction per required stay day.',
    "- For transportation copy a full catalog option: the mode or flight number together with its route.",
    "- The merged team itinerary, not your individual answer, is what is scored.",
)


def _collaboration_rules(days: int, agent_id: int) -> str:
    owned = len(ROLE_FIELDS[agent_id]) * days
    total = len(PLAN_FIELDS) * days
    rules = [
        f"- The team itinerary has {total} slots ({days} days x {len(PLAN_FIELDS)} fields); your capacity is "
        f"{owned} assignments and you must submit exactly {owned}, one per owned slot.",
        "- The team needs exactly one assignment per (day, field). Duplicating a teammate's slot wastes capacity, and "
        "two different values for one slot are a conflict that leaves the slot empty.",
        *PLAN_RULES,
    ]
    return "COLLABORATION RULES:\n" + "\n".join(rules)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def structured_constraints(row: "TravelRow") -> str:
    constraints = json.dumps(dict(row.local_constraint), sort_keys=True, ensure_ascii=False)
    return "\n".join(
        [
            "STRUCTURED CONSTRAINTS:",
            f"origin={row.org}",
            f"destination={row.dest}",
            f"days={row.days}",
            f"dates={row.date_text}",
            f"people={row.people_number}",
            f"budget={_number(row.budget)}",
            f"local_constraints={constraints}",
        ]
    )


def _output_contract(days: int, agent_id: int, use_prefill: bool) -> str:
    owned = len(owned_slots(agent_id, days))
    lines = [
        "STRICT OUTPUT CONTRACT:",
        "- Output exactly one JSON object: no Markdown fence, no prose, no second object.",
        f'- The object has exactly the keys "agent_id" and "assignments"; "agent_id" is the integer {agent_id}.',
        f'- "assignments" must contain exactly {owned} objects (never more than your capacity of {owned}), one per '
        "owned slot in the YOUR OWNED SLOTS order.",
        '- Each assignment object has exactly the keys "day" (integer), "field" (string) and "value" (string).',
        "- Values are real catalog values or \"-\"; never placeholder text.",
    ]
    if use_prefill:
        prefill = assistant_prefill(agent_id)
        lines += [
            "- GENERATION CONTRACT: the ASSISTANT PREFILL below is already written at the start of your answer; do "
            "not repeat it. It ends right after the opening quote of the first value.",
            "- Generate only the value text and its closing quote. The system then supplies every following fixed "
            "part of the assignment objects (day, field, keys, commas, brackets and braces) in owned-slot order, and "
            "you continue inside the next already-open value string. Each value has a token limit.",
            f"ASSISTANT PREFILL: {prefill}",
            "Your first generated character is inside the already-open value string of the first assignment.",
        ]
    else:
        lines += [
            f'- Write the full object: your response must start with {{"agent_id": {agent_id}, "assignments": [ and '
            "end with ]}.",
            "- The first character of your response must be {; stop right after the matching top-level }.",
        ]
    return "\n".join(lines)
