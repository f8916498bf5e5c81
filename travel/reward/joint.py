"""Joint-action evaluation: merge the two role actions, score the plan, then per-role and team metrics.

`evaluate_joint_action(completions, row)` is reward-independent: changing reward weights never
changes these numbers. It never raises on model text. The returned detail also carries the
MergeResult under `MERGE_RESULT_KEY` so the reward can reuse it instead of merging twice; that entry,
like the other `INTERNAL_DETAIL_KEYS`, is not a metric and must be dropped before logging
(`scalar_metrics` does this).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from numbers import Real
from typing import TYPE_CHECKING, Any, Sequence

from travel.reward.evaluator import evaluate_reference_plan
from travel.task.actions import PARSER_ERROR_CODES
from travel.task.fields import PLAN_FIELDS, Slot, owned_slots
from travel.task.merger import merge_agent_assignments

if TYPE_CHECKING:
    from travel.data.row import TravelRow

EVALUATION_BACKEND = "reference_constraint_scaffold_completion_metrics"
MERGE_RESULT_KEY = "_merge_result"
INTERNAL_DETAIL_KEYS: frozenset[str] = frozenset(
    {
        MERGE_RESULT_KEY,
        "slot_validity",
        "required_slot_validity",
        "merged_plan",
        "parser_errors",
        "evaluation_backend",
        "reference_catalog_counts",
    }
)
# Target-plan or imitation metrics must never reach a reward-independent evaluation.
FORBIDDEN_KEY_PARTS: tuple[str, ...] = ("gold_plan", "annotated_plan", "exact_match", "slot_quality")
NUM_AGENTS = 2
_SUCCESS = 1.0 - 1e-9


def bottleneck(values: Sequence[float]) -> float:
    """0.2 * mean + 0.8 * min (0 for no values): the weaker role dominates."""
    if not values:
        return 0.0
    return 0.2 * (sum(values) / len(values)) + 0.8 * min(values)


def harmonic_mean(values: Sequence[float]) -> float:
    """Harmonic mean; 0 when any value is <= 0 or there are none."""
    if not values or any(v <= 0.0 for v in values):
        return 0.0
    return len(values) / sum(1.0 / v for v in values)


@lru_cache(maxsize=64)
def _owned_set(agent_id: int, days: int) -> frozenset[Slot]:
    return frozenset(owned_slots(agent_id, days))


def _clamp01(value: float) -> float:
    return min(1.0, max(0.0, value))


@dataclass(frozen=True)
class RoleMetrics:
    """The per-role metrics of one role action (docs/reward.md "Joint-action metrics")."""

    action_validity: float  # strict: parses strictly and was accepted as exactly its owned slots
    soft_action_validity: float
    owned_slot_coverage: float
    ownership_precision: float
    count_fidelity: float
    item_acceptance: float
    verified_contribution: float
    required_grounded_contribution: float
    assignment_count: float
    decode_success: float
    strict_json: float
    schema_valid: float
    agent_id_match: float
    capacity_valid: float
    raw_assignment_count: float


def role_metrics(
    agent_id: int,
    parsed: Any,
    accepted: set[Slot],
    merged: set[Slot],
    slot_validity: dict[Slot, bool],
    required: frozenset[Slot],
    days: int,
) -> RoleMetrics:
    """Metrics of agent `agent_id` given its ParseResult, its accepted slots and the merged slots."""
    owned = _owned_set(agent_id, days)
    owned_accepted = accepted & owned
    raw = int(getattr(parsed, "raw_item_count", 0) or 0)
    ownership_precision = len(owned_accepted) / len(accepted) if accepted else 0.0
    count_fidelity = _clamp01(1.0 - abs(len(accepted) - len(owned)) / len(owned))
    item_acceptance = len(accepted) / raw if raw else 0.0
    flags = {name: float(bool(getattr(parsed, name, False))) for name in
             ("decode_success", "strict_json", "schema_valid", "agent_id_match", "capacity_valid")}
    soft = flags["decode_success"] * (
        flags["schema_valid"] + flags["agent_id_match"] + flags["capacity_valid"]
        + ownership_precision + count_fidelity + item_acceptance
    ) / 6.0
    strict = (
        bool(getattr(parsed, "parse_success", False))
        and accepted <= owned
        and len(accepted) == len(owned)
        and len(accepted) == raw
    )
    credited = owned_accepted & merged
    required_owned = required & owned
    verified = sum(slot_validity.get(slot, False) for slot in credited) / len(owned)
    required_contribution = (
        sum(slot_validity.get(slot, False) for slot in credited & required_owned) / len(required_owned)
        if required_owned
        else 0.0  # an empty required set is no contribution, never a vacuous success
    )
    return RoleMetrics(
        action_validity=float(strict),
        soft_action_validity=soft,
        owned_slot_coverage=len(owned_accepted) / len(owned),
        ownership_precision=ownership_precision,
        count_fidelity=count_fidelity,
        item_acceptance=item_acceptance,
        verified_contribution=verified,
        required_grounded_contribution=required_contribution,
        assignment_count=float(len(accepted)),
        raw_assignment_count=float(raw),
        **flags,
    )


def _error_codes(parsed: Any) -> tuple[str, ...]:
    codes = getattr(parsed, "error_codes", None)
    if codes is None:
        codes = [c for c in str(getattr(parsed, "error", "") or "").split(",") if c.strip()]
    return tuple(str(code).strip() for code in codes)


def _parser_error_counts(parsed_results: Sequence[Any]) -> dict[str, float]:
    """parser_error/<code>: how many of the agents' parses raised each code; `any` and `other` too."""
    counts = {f"parser_error/{code}": 0.0 for code in (*PARSER_ERROR_CODES, "any", "other")}
    for parsed in parsed_results:
        codes = set(_error_codes(parsed))
        for code in codes:
            key = f"parser_error/{code}" if code in PARSER_ERROR_CODES else "parser_error/other"
            counts[key] += 1.0
        counts["parser_error/any"] += float(bool(codes))
    return counts


def _is_number(value: Any) -> bool:
    kind = type(value)
    return kind is float or kind is int or (kind is not bool and isinstance(value, Real))


_CLEAN_KEY_SETS: set[frozenset[str]] = set()  # key sets already checked; detail keys rarely vary


def check_detail(detail: dict[str, Any]) -> None:
    """Raise if a target-plan key leaked in or an `ultimate/` metric is not a scalar."""
    key_set = frozenset(detail)
    if key_set not in _CLEAN_KEY_SETS:
        keys = "\n".join(detail).casefold()  # one scan over all keys; find the culprit only on failure
        for part in FORBIDDEN_KEY_PARTS:
            if part in keys:
                key = next(k for k in detail if part in k.casefold())
                raise RuntimeError(f"evaluation detail key {key!r} refers to a target plan ({part})")
        if len(_CLEAN_KEY_SETS) < 256:
            _CLEAN_KEY_SETS.add(key_set)
    for key, value in detail.items():
        if key.startswith("ultimate/") and not _is_number(value):
            raise RuntimeError(f"evaluation metric {key!r} must be a number, got {type(value).__name__}")


def scalar_metrics(detail: dict[str, Any]) -> dict[str, float]:
    """The loggable part of a detail: numeric values as floats, internal entries dropped."""
    return {
        key: float(value)
        for key, value in detail.items()
        if key not in INTERNAL_DETAIL_KEYS and (_is_number(value) or isinstance(value, bool))
    }


def _text(completion: Any) -> str:
    return completion if isinstance(completion, str) else ("" if completion is None else str(completion))


def evaluate_joint_action(completions: Sequence[str], row: "TravelRow") -> dict[str, Any]:
    """Merge the logistics and experience actions with capacities [3D, 4D] and evaluate the team.

    Returns the plan evaluator's detail plus the team, per-agent (`agent_<i>/*`) and parser-error keys
    of docs/reward.md "Joint-action metrics"; `detail[MERGE_RESULT_KEY]` is the MergeResult. Raises ValueError only for
    caller errors (not exactly two completions, a row without days), never for model text.
    """
    if isinstance(completions, (str, bytes)) or len(completions) != NUM_AGENTS:
        raise ValueError(f"row {row.id!r}: expected exactly {NUM_AGENTS} completions (logistics, experience)")
    days = int(row.days)
    if days < 1:
        raise ValueError(f"row {row.id!r}: a trip needs at least one day, got {days}")
    texts = [_text(c) for c in completions]
    merge = merge_agent_assignments(texts, days, [3 * days, 4 * days])
    detail = evaluate_reference_plan(merge, row)

    slot_validity: dict[Slot, bool] = detail["slot_validity"]
    required = frozenset(detail["required_slot_validity"])
    merged = set(merge.merged_assignments)
    per_agent = list(merge.per_agent_assignments)
    parsed_results = list(merge.parsed)
    roles = [
        role_metrics(a, parsed_results[a], set(per_agent[a]), merged, slot_validity, required, days)
        for a in range(NUM_AGENTS)
    ]

    conflicts = len(merge.conflict_slots or ())
    overlaps = int(merge.overlap_count or 0)
    broken = int(merge.invalid_slot_count or 0) + int(merge.self_duplicate_count or 0) + int(
        merge.extra_assignment_count or 0
    )
    total_slots = len(PLAN_FIELDS) * days
    raw_items = sum(int(getattr(p, "raw_item_count", 0) or 0) for p in parsed_results)
    strict = [role.action_validity >= 1.0 for role in roles]
    team_valid = all(strict) and conflicts == 0 and overlaps == 0 and broken == 0
    verified = [role.verified_contribution for role in roles]
    required_contributions = [role.required_grounded_contribution for role in roles]
    both_verified = all(v >= _SUCCESS for v in verified)
    collaboration = detail["ultimate/reference_plan_success"] >= 1.0 and team_valid and both_verified

    detail.update(
        {
            "action_validity": sum(strict) / NUM_AGENTS,
            "team_action_valid": float(team_valid),
            "team_soft_action_validity": harmonic_mean([role.soft_action_validity for role in roles]),
            "cooperative_contribution": harmonic_mean(verified),
            "required_cooperative_contribution": bottleneck(required_contributions),
            "overlap_rate": min(1.0, overlaps / total_slots),
            "conflict_rate": min(1.0, conflicts / total_slots),
            "invalid_action_rate": min(1.0, broken / max(1, raw_items)),
            "conflict_count": float(conflicts),
            "overlap_count": float(overlaps),
            "ultimate/team_action_success": float(team_valid),
            "ultimate/both_agent_verified_contribution": float(both_verified),
            "ultimate/both_agent_required_grounded_contribution": float(
                all(c >= _SUCCESS for c in required_contributions)
            ),
            "ultimate/conflict_free": float(conflicts == 0),
            "ultimate/collaboration_success": float(collaboration),
            "evaluation_backend": EVALUATION_BACKEND,
            "merged_plan": [dict(plan_row) for plan_row in merge.plan],
            "parser_errors": [",".join(_error_codes(p)) for p in parsed_results],
        }
    )
    for agent_id, role in enumerate(roles):
        detail.update({f"agent_{agent_id}/{name}": value for name, value in vars(role).items()})
    detail.update(_parser_error_counts(parsed_results))
    check_detail(detail)
    detail[MERGE_RESULT_KEY] = merge
    return detail
