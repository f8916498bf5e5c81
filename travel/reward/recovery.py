"""Reward-only recovery surface (REFERENCE.md 10.1): ranks malformed actions without touching strict metrics.

Per agent: complete (day, field, value) triples recovered by the parser and by a regex, the owned
ones accepted non-atomically; format-progress signals; overflow/rejection rates; the 8-gram
reference-copy rate and the overlong rate. The accepted triples are re-serialised as strict actions
so the ordinary merger and evaluator can score a recovered plan. Nothing here feeds Q, B, G, U or
any end metric: it only feeds the two bounded learning channels P and E and the penalties.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Mapping, Sequence

from travel.task.fields import PLAN_FIELDS, Slot, owned_slots

_QUOTED = r"""("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"""
TRIPLE_PATTERN = re.compile(
    r"""(?<![\w])["']?day["']?\s*:\s*(\d+)\s*,\s*"""
    r"""["']?field["']?\s*:\s*""" + _QUOTED + r"""\s*,\s*"""
    r"""["']?value["']?\s*:\s*""" + _QUOTED,
    re.IGNORECASE | re.DOTALL,
)
_AGENT_ID_KEY = re.compile(r"""["']?agent_id["']?\s*:""", re.IGNORECASE)
_AGENT_ID_VALUE = re.compile(r"""["']?agent_id["']?\s*:\s*(\d+)""", re.IGNORECASE)
_ASSIGNMENTS_KEY = re.compile(r"""["']?assignments["']?\s*:\s*(.?)""", re.IGNORECASE | re.DOTALL)
_DELIMITER_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|"|[{}\[\]]', re.DOTALL)
_NEEDS_DECODING = re.compile(r"[\\\x00-\x1f]")
WORD_TOKEN = re.compile(r"[a-z0-9]+(?:[.$:+/\-][a-z0-9]+)*")

_FIELD_SET = frozenset(PLAN_FIELDS)
COPY_NGRAM = 8
COPY_FLOOR, COPY_SPAN = 0.20, 0.60
OVERLONG_BASE, OVERLONG_PER_SLOT = 240, 180
FORMAT_WEIGHTS: tuple[tuple[str, float], ...] = (
    ("object_start", 0.10),
    ("agent_id_key", 0.10),
    ("agent_id_match", 0.10),
    ("assignments_key", 0.10),
    ("assignments_list", 0.20),
    ("owned_triple_progress", 0.25),
    ("closed_delimiters", 0.15),
)
STRUCTURAL_SIGNALS: tuple[str, ...] = ("object_start", "agent_id_match", "assignments_list", "closed_delimiters")

Triple = tuple[int, str, str]


def _decode_quoted(token: str) -> str | None:
    """A JSON (double) or Python (single) quoted string literal; None when it does not decode."""
    if not _NEEDS_DECODING.search(token):
        return token[1:-1]
    try:
        value = json.loads(token)
    except ValueError:
        try:
            value = ast.literal_eval(token)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return value if isinstance(value, str) else None


def recover_triples(text: str) -> list[Triple]:
    """Every complete `day: <digits>, field: <quoted>, value: <quoted>` triple, in text order."""
    triples = []
    for match in TRIPLE_PATTERN.finditer(text):
        field = _decode_quoted(match.group(2))
        value = _decode_quoted(match.group(3))
        if field is not None and value is not None:
            triples.append((int(match.group(1)), field, value))
    return triples


def delimiters_closed(text: str) -> bool:
    """Starts with `{`, ends with `}`, and braces/brackets outside string literals balance."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return False
    stack: list[str] = []
    for match in _DELIMITER_TOKENS.finditer(stripped):
        token = match.group()
        if token in "{[":
            stack.append("}" if token == "{" else "]")
        elif token in "}]":
            if not stack or stack.pop() != token:
                return False
        elif token == '"':
            return False  # an unterminated string literal
    return not stack


@lru_cache(maxsize=512)
def reference_ngram_index(reference_text: str) -> tuple[frozenset[str], frozenset[tuple[str, ...]]]:
    """The reference's word vocabulary and 8-gram set (computed once per reference string)."""
    tokens = WORD_TOKEN.findall(reference_text.lower())
    grams = frozenset(tuple(tokens[i : i + COPY_NGRAM]) for i in range(len(tokens) - COPY_NGRAM + 1))
    return frozenset(tokens), grams


def reference_copy_fraction(text: str, index: tuple[frozenset[str], frozenset[tuple[str, ...]]]) -> float | None:
    """Fraction of the text's 8-grams that occur in the reference; None when the text has under 8 tokens."""
    tokens = WORD_TOKEN.findall(text.lower())
    total = len(tokens) - COPY_NGRAM + 1
    if total <= 0:
        return None
    vocabulary, grams = index
    present = 0
    last_unknown = -1  # a window holding a word the reference never uses cannot be a copied 8-gram
    for position, token in enumerate(tokens):
        if token not in vocabulary:
            last_unknown = position
        start = position - COPY_NGRAM + 1
        if start >= 0 and last_unknown < start and tuple(tokens[start : position + 1]) in grams:
            present += 1
    return present / total


def reference_copy_rate(text: str, index: tuple[frozenset[str], frozenset[tuple[str, ...]]]) -> float:
    """clamp01((copied 8-gram fraction - 0.20) / 0.60); 0 for texts under 8 tokens."""
    fraction = reference_copy_fraction(text, index)
    if fraction is None:
        return 0.0
    return min(1.0, max(0.0, (fraction - COPY_FLOOR) / COPY_SPAN))


def overlong_rate(text: str, owned_count: int) -> float:
    """clamp01((len(text) - L) / L) with L = 240 + 180 * owned slots."""
    limit = OVERLONG_BASE + OVERLONG_PER_SLOT * owned_count
    return min(1.0, max(0.0, (len(text) - limit) / limit))


def _slot_of(day: Any, field: Any, days: int) -> Slot | None:
    if isinstance(day, bool) or not isinstance(day, int) or not 1 <= day <= days or not isinstance(field, str):
        return None
    field = field.casefold()
    return (day, field) if field in _FIELD_SET else None


def accept_owned(candidates: Iterable[Sequence[Any]], owned: frozenset[Slot], days: int) -> dict[Slot, str]:
    """First non-blank string value per owned slot, in candidate order (non-atomic: extras are ignored)."""
    accepted: dict[Slot, str] = {}
    for candidate in candidates:
        if len(candidate) != 3:
            continue
        day, field, value = candidate
        slot = _slot_of(day, field, days)
        if slot is None or slot not in owned or slot in accepted:
            continue
        if isinstance(value, str) and value.strip():
            accepted[slot] = value
    return accepted


@dataclass(frozen=True)
class AgentRecovery:
    """One agent's recovery signals; rates and flags are floats in [0, 1]."""

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

    @property
    def owned_triple_progress(self) -> float:
        return len(self.accepted) / self.owned_count if self.owned_count else 0.0

    @property
    def overflow_rate(self) -> float:
        return max(0, self.raw_count - self.owned_count) / max(1, self.raw_count)

    @property
    def rejected_rate(self) -> float:
        return max(0, self.raw_count - len(self.accepted)) / max(1, self.raw_count)

    @property
    def violation_rate(self) -> float:
        return max(self.overflow_rate, self.rejected_rate)

    @property
    def format_progress(self) -> float:
        return sum(weight * getattr(self, name) for name, weight in FORMAT_WEIGHTS)

    @property
    def structural(self) -> float:
        return sum(getattr(self, name) for name in STRUCTURAL_SIGNALS) / len(STRUCTURAL_SIGNALS)

    def action_text(self) -> str:
        """The accepted triples as a strict action for the ordinary merger."""
        assignments = [{"day": day, "field": field, "value": value} for day, field, value in self.accepted]
        return json.dumps({"agent_id": self.agent_id, "assignments": assignments})

    def details(self) -> dict[str, float]:
        names = (
            "object_start", "agent_id_key", "agent_id_match", "assignments_key", "assignments_list",
            "assignments_string", "closed_delimiters", "owned_triple_progress", "format_progress", "overflow_rate",
            "rejected_rate", "violation_rate", "structural", "reference_copy_rate", "overlong_rate",
        )  # fmt: skip
        out = {f"agent_{self.agent_id}/{name}": float(getattr(self, name)) for name in names}
        out[f"agent_{self.agent_id}/raw_assignment_count"] = float(self.raw_count)
        out[f"agent_{self.agent_id}/recovered_assignment_count"] = float(len(self.accepted))
        return out


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
    lets the delimiter scan be skipped: such a text is balanced by construction."""
    owned = frozenset(owned_slots(agent_id, days))
    regex_triples = recover_triples(text)
    accepted = accept_owned([*parser_assignments, *regex_triples], owned, days)
    stripped = text.lstrip()
    id_value = _AGENT_ID_VALUE.search(text)
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
        raw_count=max(int(parser_raw_count), len(regex_triples)),
        object_start=float(stripped.startswith("{")),
        agent_id_key=float(_AGENT_ID_KEY.search(text) is not None),
        agent_id_match=float(id_value is not None and int(id_value.group(1)) == agent_id),
        assignments_key=float(assignments is not None),
        assignments_list=float(opener == "["),
        assignments_string=float(opener in ('"', "'") and opener != ""),
        closed_delimiters=float(closed),
        reference_copy_rate=reference_copy_rate(text, reference_index),
        overlong_rate=overlong_rate(text, len(owned)),
    )


def required_contribution(
    recovery: AgentRecovery, required: frozenset[Slot], required_slot_validity: Mapping[Slot, Any]
) -> float:
    """Recovered analogue of required_grounded_contribution: valid required owned slots this agent filled,
    over its required owned slots (0 when it owns none). Recovered actions never conflict, so every
    accepted triple is merged."""
    owned_required = required & frozenset(owned_slots(recovery.agent_id, recovery.days))
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
            out.update({f"shaping/{key}": value for key, value in agent.details().items()})
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
    "assignment_coverage",
    "required_fill_rate",
    "required_grounded_recall",
    "entity_grounding_precision",
    "grounding_f1",
    "commonsense_soft",
    "hard_constraint_soft",
)


def build_recovery_surface(
    texts: Sequence[str],
    row: Any,
    strict_merge: Any,
    strict_detail: Mapping[str, Any],
    plan_memo: dict[Any, Mapping[str, Any]] | None = None,
) -> RecoverySurface:
    """Recovery signals of both agents and the evaluation of their recovered merge.

    `strict_merge` is the joint evaluation's MergeResult (its per-agent parses are reused: the merger
    parses each role with capacity |owned|, exactly as recovery requires) and `strict_detail` its plan
    evaluation, reused when the recovered plan is the strict plan. `plan_memo` shares recovered-plan
    evaluations between joint actions of the same row.
    """
    from travel.reward.evaluator import evaluate_reference_plan
    from travel.task.merger import merge_agent_assignments

    days = int(row.days)
    index = reference_ngram_index(row.reference_information)
    agents = []
    for agent_id, text in enumerate(texts):
        parsed = strict_merge.parsed[agent_id]
        strict_object = bool(parsed.strict_json) and text.lstrip().startswith("{")
        agents.append(
            recover_agent(text, agent_id, days, parsed.assignments, parsed.raw_item_count, index, strict_object)
        )

    recovered_slots = {(day, field): value.strip() for agent in agents for day, field, value in agent.accepted}
    reused = recovered_slots == dict(strict_merge.merged_assignments)
    if reused:
        plan = strict_detail
    else:
        key = tuple(sorted(recovered_slots.items()))
        plan = plan_memo.get(key) if plan_memo is not None else None
        if plan is None:
            merge = merge_agent_assignments([a.action_text() for a in agents], days, [a.owned_count for a in agents])
            plan = evaluate_reference_plan(merge, row)
            if plan_memo is not None:
                plan_memo[key] = plan
    validity = plan["required_slot_validity"]
    required = frozenset(validity)
    contributions = tuple(required_contribution(agent, required, validity) for agent in agents)
    return RecoverySurface(tuple(agents), plan, contributions, reused)
