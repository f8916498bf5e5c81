"""Reward-only recovery surface (docs/reward.md "Reward-only recovery"): ranks malformed actions without
touching strict metrics.

Per agent: complete (day, field, value) triples recovered by the parser and by a regex, the owned
ones accepted non-atomically; format-progress signals; overflow/rejection rates; the 8-gram
reference-copy rate and the overlong rate (travel/reward/penalties.py). The accepted triples form a recovered merge (what the
merger makes of them re-serialised as strict actions) that the ordinary evaluator scores. Nothing
here feeds Q, B, G, U or any end metric: only the bounded learning channels P and E and the penalties.
"""

from __future__ import annotations

import ast
import json
import math
import re
import warnings
from dataclasses import dataclass, field as dataclass_field
from functools import lru_cache
from typing import Any, Iterable, Mapping, Sequence

from travel.reward.evaluator import evaluate_reference_plan
from travel.reward.penalties import overlong_rate, reference_copy_rate, reference_ngram_index
from travel.task.actions import MAX_ACTION_CHARS
from travel.task.fields import PLAN_FIELDS, Slot, owned_slots
from travel.task.merger import MergeResult

# Unrolled quoted-string alternatives and explicit letter classes: this runs on every action text and
# is markedly faster than the IGNORECASE / `\w` spelling.
_QUOTED = r"""("[^"\\]*(?:\\.[^"\\]*)*"|'[^'\\]*(?:\\.[^'\\]*)*')"""
TRIPLE_PATTERN = re.compile(
    r"""(?<![A-Za-z0-9_])[dD][aA][yY]["']?\s*:\s*(\d+)\s*,\s*"""
    r"""["']?[fF][iI][eE][lL][dD]["']?\s*:\s*""" + _QUOTED + r"""\s*,\s*"""
    r"""["']?[vV][aA][lL][uU][eE]["']?\s*:\s*""" + _QUOTED,
    re.DOTALL,
)
# Keys as the schema spells them (lowercase), so the scan can search for a literal prefix.
_AGENT_ID = re.compile(r"""agent_id["']?\s*:\s*(\d+)?""")
_ASSIGNMENTS_KEY = re.compile(r"""assignments["']?\s*:\s*(.?)""", re.DOTALL)
_STRING_LITERAL = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^{}\[\]]+")
_PAIR_PASSES = 8

MAX_DIGITS = 9
FORMAT_WEIGHTS: tuple[tuple[str, float], ...] = (
    ("object_start", 0.10), ("agent_id_key", 0.10), ("agent_id_match", 0.10), ("assignments_key", 0.10),
    ("assignments_list", 0.20), ("owned_triple_progress", 0.25), ("closed_delimiters", 0.15),
)  # fmt: skip
STRUCTURAL_SIGNALS: tuple[str, ...] = ("object_start", "agent_id_match", "assignments_list", "closed_delimiters")

Triple = tuple[int, str, str]


@lru_cache(maxsize=64)
def owned_slot_set(agent_id: int, days: int) -> frozenset[Slot]:
    return frozenset(owned_slots(agent_id, days))


def _decode_quoted(token: str) -> str | None:
    """A JSON (double) or Python (single) quoted string literal; None when it does not decode."""
    if "\\" not in token and token.isprintable():
        return token[1:-1]  # nothing to unescape: the common case, without a decoder call
    try:
        value = json.loads(token)
    except ValueError:
        try:
            with warnings.catch_warnings():  # an invalid escape warns; the result must not depend on filters
                warnings.simplefilter("ignore")
                value = ast.literal_eval(token)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return value if isinstance(value, str) else None


def recover_triples(text: str) -> list[Triple]:
    """Every complete `day: <digits>, field: <quoted>, value: <quoted>` triple, in text order."""
    triples = []
    for day, quoted_field, quoted_value in TRIPLE_PATTERN.findall(text):
        if len(day) > MAX_DIGITS:
            continue  # no trip has that many days; int() of a huge digit run can also raise
        field = _decode_quoted(quoted_field)
        value = _decode_quoted(quoted_value)
        if field is not None and value is not None:
            triples.append((int(day), field, value))
    return triples


def delimiters_closed(text: str) -> bool:
    """Starts with `{`, ends with `}`, and braces/brackets outside string literals balance."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return False
    outside = _STRING_LITERAL.sub("", stripped)
    if '"' in outside:
        return False  # an unterminated string literal
    brackets = _NOT_BRACKET.sub("", outside)
    # Deleting innermost pairs is linear per pass and an action nests only a few levels; a deeper text
    # falls back to the stack scan so the cost stays linear.
    for _ in range(_PAIR_PASSES):
        reduced = brackets.replace("{}", "").replace("[]", "")
        if reduced == brackets:
            return not reduced
        brackets = reduced
    stack: list[str] = []
    for char in brackets:
        if char in "{[":
            stack.append("}" if char == "{" else "]")
        elif not stack or stack.pop() != char:
            return False
    return not stack


def accept_owned(candidates: Iterable[Any], owned: frozenset[Slot]) -> dict[Slot, str]:
    """First non-blank string value per owned slot, in candidate order (non-atomic: extras are ignored).
    A candidate counts only with a non-bool int day, a field that casefolds to an owned field and a
    string value; "-" is a value."""
    accepted: dict[Slot, str] = {}
    for candidate in candidates:
        if len(accepted) == len(owned):
            break
        try:
            day, field, value = candidate
        except (TypeError, ValueError):
            continue
        if type(day) is not int or type(field) is not str or type(value) is not str:
            continue
        slot = (day, field)
        if slot not in owned:
            slot = (day, field.casefold())
            if slot not in owned:
                continue
        if slot not in accepted and value.strip():
            accepted[slot] = value
    return accepted


@dataclass(frozen=True)
class AgentRecovery:
    """One agent's recovery signals; flags and rates are floats in [0, 1]. The derived rates are computed
    once on construction because every scored joint action reads them several times."""

    agent_id: int
    days: int
    owned_count: int
    accepted: tuple[Triple, ...]  # sorted (day, field, value)
    raw_count: int
    object_start: float
    agent_id_key: float
    agent_id_match: float
    assignments_key: float
    assignments_list: float
    assignments_string: float
    closed_delimiters: float
    reference_copy_rate: float
    overlong_rate: float
    owned_triple_progress: float = dataclass_field(init=False)
    overflow_rate: float = dataclass_field(init=False)
    rejected_rate: float = dataclass_field(init=False)
    violation_rate: float = dataclass_field(init=False)
    format_progress: float = dataclass_field(init=False)
    structural: float = dataclass_field(init=False)

    def __post_init__(self) -> None:
        def derive(name: str, value: float) -> None:
            object.__setattr__(self, name, value)

        raw, accepted = self.raw_count, len(self.accepted)
        derive("owned_triple_progress", accepted / self.owned_count if self.owned_count else 0.0)
        derive("overflow_rate", max(0, raw - self.owned_count) / max(1, raw))
        derive("rejected_rate", max(0, raw - accepted) / max(1, raw))
        derive("violation_rate", max(self.overflow_rate, self.rejected_rate))
        derive("format_progress", math.fsum(weight * getattr(self, name) for name, weight in FORMAT_WEIGHTS))
        derive("structural", sum(getattr(self, name) for name in STRUCTURAL_SIGNALS) / len(STRUCTURAL_SIGNALS))

    def action_text(self) -> str:
        """The accepted triples as a strict action (what `recovered_merge` stands for)."""
        assignments = [{"day": day, "field": field, "value": value} for day, field, value in self.accepted]
        return json.dumps({"agent_id": self.agent_id, "assignments": assignments})

    def details(self, prefix: str = "") -> dict[str, float]:
        """Signals as `<prefix>agent_<i>/<name>` floats."""
        keys = _detail_keys(prefix, self.agent_id)
        out = {key: float(getattr(self, name)) for key, name in zip(keys, AGENT_DETAIL_NAMES)}
        out[keys[-2]] = float(self.raw_count)
        out[keys[-1]] = float(len(self.accepted))
        return out


AGENT_DETAIL_NAMES: tuple[str, ...] = (
    "object_start", "agent_id_key", "agent_id_match", "assignments_key", "assignments_list", "assignments_string",
    "closed_delimiters", "owned_triple_progress", "format_progress", "overflow_rate", "rejected_rate",
    "violation_rate", "structural", "reference_copy_rate", "overlong_rate",
)  # fmt: skip


@lru_cache(maxsize=16)
def _detail_keys(prefix: str, agent_id: int) -> tuple[str, ...]:
    names = (*AGENT_DETAIL_NAMES, "raw_assignment_count", "recovered_assignment_count")
    return tuple(f"{prefix}agent_{agent_id}/{name}" for name in names)


def recover_agent(
    text: str,
    agent_id: int,
    days: int,
    parser_assignments: Iterable[Sequence[Any]],
    parser_raw_count: int,
    reference_index: tuple[frozenset[str], frozenset[tuple[str, ...]]],
    strict_object: bool = False,
) -> AgentRecovery:
    """Recovery signals for one agent's text. `strict_object` (the whole text parsed as a JSON object)
    lets the delimiter scan be skipped: such a text is balanced by construction. Every scan reads the text's
    first MAX_ACTION_CHARS characters (the strict parser's cap), so a text of any size scores in bounded time;
    the overlong rate counts the whole length."""
    whole, text = text, text[:MAX_ACTION_CHARS]
    owned = owned_slot_set(agent_id, days)
    lowered = text.lower()
    accepted = accept_owned(parser_assignments, owned)
    raw_count = int(parser_raw_count)
    # Every regex triple needs its own "field" key, so when the parser already filled every owned slot
    # and the text holds no more "field"s than parser items, the regex can change neither the accepted
    # slots nor the raw count (max of both) and is skipped.
    if len(accepted) < len(owned) or lowered.count("field") > raw_count:
        regex_triples = recover_triples(text)
        accepted = accept_owned([*parser_assignments, *regex_triples], owned)
        raw_count = max(raw_count, len(regex_triples))
    stripped = text.lstrip()
    id_key = _AGENT_ID.search(text)
    id_value = id_key.group(1) if id_key else None
    assignments = _ASSIGNMENTS_KEY.search(text)
    opener = assignments.group(1) if assignments else ""
    if strict_object:
        closed = stripped.startswith("{") and stripped.rstrip().endswith("}")
    else:
        closed = delimiters_closed(text)
    return AgentRecovery(
        agent_id=agent_id,
        days=days,
        owned_count=len(owned),
        accepted=tuple(sorted((day, field, value) for (day, field), value in accepted.items())),
        raw_count=raw_count,
        object_start=float(stripped.startswith("{")),
        agent_id_key=float(id_key is not None),
        agent_id_match=float(id_value is not None and len(id_value) <= MAX_DIGITS and int(id_value) == agent_id),
        assignments_key=float(assignments is not None),
        assignments_list=float(opener == "["),
        assignments_string=float(opener in ('"', "'")),
        closed_delimiters=float(closed),
        reference_copy_rate=reference_copy_rate(lowered, reference_index),
        overlong_rate=overlong_rate(whole, len(owned)),
    )


def required_contribution(
    recovery: AgentRecovery, required: frozenset[Slot], required_slot_validity: Mapping[Slot, Any]
) -> float:
    """Recovered analogue of required_grounded_contribution: valid required owned slots this agent filled,
    over its required owned slots (0 when it owns none). Recovered actions never conflict, so every
    accepted triple is merged."""
    owned_required = required & owned_slot_set(recovery.agent_id, recovery.days)
    if not owned_required:
        return 0.0
    filled = {(day, field) for day, field, _ in recovery.accepted}
    valid = sum(1 for slot in owned_required if slot in filled and required_slot_validity.get(slot))
    return valid / len(owned_required)


def recovered_balance_term(recovery: AgentRecovery, contribution: float) -> float:
    """ratio * structural * (1 - violation)^2 for one agent (the input of the recovered bottleneck)."""
    return contribution * recovery.structural * (1.0 - recovery.violation_rate) ** 2


@dataclass(frozen=True)
class RecoverySurface:
    """The team's recovery surface: both agents' signals and the recovered plan's evaluation."""

    agents: tuple[AgentRecovery, ...]
    recovered_plan: Mapping[str, Any]  # evaluate_reference_plan detail of the recovered merge
    contributions: tuple[float, ...]  # recovered required grounded contribution per agent
    reused_strict_plan: bool  # the recovered plan equals the strict one, so its evaluation was reused

    @property
    def recovery_violation_rate(self) -> float:
        return max(agent.violation_rate for agent in self.agents)

    @property
    def reference_copy_rate(self) -> float:
        return max(agent.reference_copy_rate for agent in self.agents)

    @property
    def overlong_rate(self) -> float:
        return max(agent.overlong_rate for agent in self.agents)

    @property
    def balance_terms(self) -> tuple[float, ...]:
        return tuple(recovered_balance_term(a, c) for a, c in zip(self.agents, self.contributions))

    def details(self) -> dict[str, float]:
        """`shaping/*` diagnostics (numeric only)."""
        out: dict[str, float] = {}
        for agent, contribution, term in zip(self.agents, self.contributions, self.balance_terms):
            out.update(agent.details("shaping/"))
            out[f"shaping/agent_{agent.agent_id}/recovered_required_contribution"] = contribution
            out[f"shaping/agent_{agent.agent_id}/recovered_balance_term"] = term
        count = len(self.agents)
        out["shaping/recovery_violation_rate"] = self.recovery_violation_rate
        out["shaping/reference_copy_rate"] = self.reference_copy_rate
        out["shaping/overlong_rate"] = self.overlong_rate
        out["shaping/format_progress_mean"] = sum(a.format_progress for a in self.agents) / count
        out["shaping/recovered_owned_coverage_mean"] = sum(a.owned_triple_progress for a in self.agents) / count
        out["shaping/recovered_owned_coverage_min"] = min(a.owned_triple_progress for a in self.agents)
        out["shaping/reused_strict_plan"] = float(self.reused_strict_plan)
        for key in RECOVERED_PLAN_KEYS:
            value = self.recovered_plan.get(key)
            if isinstance(value, (int, float)):
                out[f"shaping/recovered/{key}"] = float(value)
        return out


RECOVERED_PLAN_KEYS: tuple[str, ...] = (
    "assignment_coverage", "required_fill_rate", "required_grounded_recall", "entity_grounding_precision",
    "grounding_f1", "commonsense_soft", "hard_constraint_soft",
)  # fmt: skip


def recovered_merge(agents: Sequence[AgentRecovery], days: int) -> Any:
    """The MergeResult the merger builds from the agents' recovered actions (`AgentRecovery.action_text`)
    with role capacities, constructed directly: recovered triples are owned, in range, non-blank and
    disjoint across roles, so the merger would accept every one (value stripped) with no conflict,
    overlap or drop. It carries no parses; only its plan-level metrics are used."""

    per_agent = [{(day, field): value.strip() for day, field, value in agent.accepted} for agent in agents]
    merged = {slot: value for accepted in per_agent for slot, value in accepted.items()}
    plan = [
        {"day": day, **{field: merged.get((day, field), "-") for field in PLAN_FIELDS}} for day in range(1, days + 1)
    ]
    return MergeResult(
        plan=plan,
        parsed=[],
        merged_assignments=merged,
        per_agent_assignments=per_agent,
        conflict_slots=[],
        overlap_count=0,
        self_duplicate_count=0,
        invalid_slot_count=0,
        extra_assignment_count=0,
        capacity=max((agent.owned_count for agent in agents), default=0),
        merged_sources={slot: a for a, accepted in enumerate(per_agent) for slot in accepted},
    )


@dataclass
class RecoveryMemo:
    """Work shared between the joint actions of ONE row: per-agent recoveries keyed by (agent, text) and
    recovered-plan evaluations keyed by the recovered slots. Sampled groups often repeat one agent's text."""

    agents: dict[tuple[int, str], AgentRecovery] = dataclass_field(default_factory=dict)
    plans: dict[tuple[tuple[Slot, str], ...], Mapping[str, Any]] = dataclass_field(default_factory=dict)


def build_recovery_surface(
    texts: Sequence[str],
    row: Any,
    strict_merge: Any,
    strict_detail: Mapping[str, Any],
    memo: RecoveryMemo | None = None,
) -> RecoverySurface:
    """Recovery signals of both agents and the evaluation of their recovered merge.

    `strict_merge` is the joint evaluation's MergeResult (its per-agent parses are reused: the merger
    parses each role with capacity |owned|, exactly as recovery requires) and `strict_detail` its plan
    evaluation, reused when the recovered plan is the strict plan. `memo` shares work between the
    joint actions of one row.
    """

    memo = memo if memo is not None else RecoveryMemo()
    days = int(row.days)
    index = reference_ngram_index(row.reference_information)
    agents = []
    for agent_id, text in enumerate(texts):
        agent = memo.agents.get((agent_id, text))
        if agent is None:
            parsed = strict_merge.parsed[agent_id]
            strict_object = bool(parsed.strict_json) and text.lstrip().startswith("{")
            agent = recover_agent(text, agent_id, days, parsed.assignments, parsed.raw_item_count, index, strict_object)
            memo.agents[(agent_id, text)] = agent
        agents.append(agent)

    recovered_slots = {(day, field): value.strip() for agent in agents for day, field, value in agent.accepted}
    reused = recovered_slots == strict_merge.merged_assignments
    if reused:
        plan = strict_detail
    else:
        key = tuple(sorted(recovered_slots.items()))
        plan = memo.plans.get(key)
        if plan is None:
            plan = memo.plans[key] = evaluate_reference_plan(recovered_merge(agents, days), row)
    validity = plan["required_slot_validity"]
    required = frozenset(validity)
    contributions = tuple(required_contribution(agent, required, validity) for agent in agents)
    return RecoverySurface(tuple(agents), plan, contributions, reused)
