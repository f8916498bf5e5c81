"""Reward throughput: joint actions scored per second on one core, on the real TravelPlanner train rows.

For every row it builds a realistic feasible plan from the row's own catalog and scaffold (cheapest
eligible options, distinct restaurants and attractions), then a mix of joint actions: valid, partial
(truncated or thinned), malformed (prose prefix, broken brackets, Python-literal quoting) and
all-dash. It prints joint actions per second of this process's CPU time, pinned to one core (all
rows, 5-day rows and each kind; wall-clock too, which a busy machine lowers), the ratio to the
1,000/s target and to a json.loads baseline measured in the same run, and the share of time per stage.

    python bench/reward_throughput.py [--data ../shared/data/travelplanner/train.jsonl] [--actions 3000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from travel.data import load_rows  # noqa: E402
from travel.data.catalog import (  # noqa: E402
    accommodation_satisfies_house_rule,
    accommodation_satisfies_room_type,
    transportation_satisfies_rule,
)
from travel.data.row import TravelRow  # noqa: E402
from travel.reward import score_joint_action  # noqa: E402
from travel.task.fields import PLAN_FIELDS, owned_slots  # noqa: E402

DEFAULT_DATA = REPO_ROOT / ".." / "shared" / "data" / "travelplanner" / "train.jsonl"
TARGET_PER_SECOND = 1000.0


# ---- a feasible plan per row ------------------------------------------------------------------


def _value(entry: Any) -> str:
    return f"{entry.name}, {entry.city}"


def _transport_value(entry: Any) -> str:
    if entry.mode == "flight":
        return f"Flight Number: {entry.name}, from {entry.origin} to {entry.destination}"
    return f"{entry.mode.capitalize()}, from {entry.origin} to {entry.destination}"


def _cheapest(entries: Sequence[Any]) -> Any | None:
    priced = [e for e in entries if e.cost is not None]
    return min(priced, key=lambda e: e.cost) if priced else (entries[0] if entries else None)


def feasible_plan(row: TravelRow) -> list[dict[str, str]]:
    """Cheapest constraint-compatible options along the scaffold; '-' where nothing fits."""
    catalog, constraint = row.catalog, row.local_constraint or {}
    same = lambda a, b: a.strip().casefold() == b.strip().casefold()  # noqa: E731
    plan = [{"day": leg.day, **{f: "-" for f in PLAN_FIELDS}, "current_city": leg.current_city} for leg in row.scaffold]
    used_meals: set[str] = set()
    used_sights: set[str] = set()
    for leg, day in zip(row.scaffold, plan):
        if leg.kind == "move":
            options = [
                e for e in catalog.transportation
                if same(e.origin, leg.start) and same(e.destination, leg.end) and (not e.date or e.date == leg.date)
                and transportation_satisfies_rule(e, constraint.get("transportation"))
            ]  # fmt: skip
            choice = _cheapest([e for e in options if e.mode != "self-driving"]) or _cheapest(options)
            day["transportation"] = _transport_value(choice) if choice else "-"
            continue
        meals = sorted((e for e in catalog.restaurants if same(e.city, leg.start) and e.name not in used_meals),
                       key=lambda e: (e.cost is None, e.cost or 0.0))  # fmt: skip
        for field, entry in zip(("breakfast", "lunch", "dinner"), meals):
            day[field] = _value(entry)
            used_meals.add(entry.name)
        sights = [e for e in catalog.attractions if same(e.city, leg.start) and e.name not in used_sights]
        if sights:
            day["attraction"] = _value(sights[0])
            used_sights.add(sights[0].name)
    for leg, day in zip(row.scaffold[:-1], plan):
        run = sum(1 for other in row.scaffold[:-1] if same(other.end, leg.end))
        lodging = [
            e for e in catalog.accommodations
            if same(e.city, leg.end) and e.minimum_nights <= run
            and accommodation_satisfies_room_type(e, constraint.get("room type"))
            and accommodation_satisfies_house_rule(e, constraint.get("house rule"))
        ]  # fmt: skip
        choice = _cheapest(lodging)
        day["accommodation"] = _value(choice) if choice else "-"
    return plan


# ---- joint-action variants ----------------------------------------------------------------------


def action(agent_id: int, plan: Sequence[dict[str, str]], days: int) -> dict[str, Any]:
    by_day = {p["day"]: p for p in plan}
    return {
        "agent_id": agent_id,
        "assignments": [{"day": d, "field": f, "value": by_day[d][f]} for d, f in owned_slots(agent_id, days)],
    }


def variants(row: TravelRow, rng: random.Random) -> list[tuple[str, list[str]]]:
    """One joint action of each kind for this row (randomised, so repeated calls differ)."""
    plan, days = feasible_plan(row), row.days
    valid = [json.dumps(action(a, plan, days)) for a in (0, 1)]
    dash_plan = [{"day": p["day"], **{f: "-" for f in PLAN_FIELDS}} for p in plan]
    dash = [json.dumps(action(a, dash_plan, days)) for a in (0, 1)]
    thinned = action(1, plan, days)
    for item in thinned["assignments"]:
        if rng.random() < 0.4:
            item["value"] = "-"
    agent = rng.randrange(2)
    truncated = list(valid)
    truncated[agent] = valid[agent][: rng.randrange(20, len(valid[agent]))]
    prefixed = list(valid)
    prefixed[agent] = "Here is my action:\n" + valid[agent]
    broken = list(valid)
    broken[agent] = valid[agent][:-2] + "}"
    literal = list(valid)
    literal[agent] = repr(action(agent, plan, days))
    return [
        ("valid", valid),
        ("partial", [valid[0], json.dumps(thinned)]),
        ("partial", truncated),
        ("malformed", prefixed),
        ("malformed", broken),
        ("malformed", literal),
        ("all-dash", dash),
    ]


# ---- timing -------------------------------------------------------------------------------------


class StageClock:
    """Exclusive CPU time per wrapped function: a call's time minus the time of wrapped calls inside it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._children: list[float] = []

    def wrap(self, stage: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            self._children.append(0.0)
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = time.process_time() - start
                inner = self._children.pop()
                self.seconds[stage] = self.seconds.get(stage, 0.0) + elapsed - inner
                if self._children:
                    self._children[-1] += elapsed

        return timed


def stage_times(work: Sequence[tuple[TravelRow, str, list[str]]]) -> dict[str, float]:
    """One instrumented pass: exclusive seconds per stage of score_joint_action (module attributes are
    wrapped for the pass and restored afterwards; the code itself is unchanged)."""
    import travel.reward.evaluator as evaluator
    import travel.reward.joint as joint
    import travel.reward.recovery as recovery
    import travel.task.merger as merger

    clock = StageClock()
    patches = [
        (merger, "parse_assignments", "parse"),
        (joint, "merge_agent_assignments", "merge"),
        (joint, "evaluate_reference_plan", "evaluate plan"),
        (evaluator, "evaluate_reference_plan", "evaluate plan"),
        (joint, "evaluate_joint_action", "joint metrics"),
        (recovery, "build_recovery_surface", "recovery"),
    ]
    originals = [(module, name, getattr(module, name)) for module, name, _ in patches]
    try:
        for module, name, stage in patches:
            setattr(module, name, clock.wrap(stage, getattr(module, name)))
        start = time.process_time()
        for row, _, texts in work:
            score_joint_action(row, texts)
        total = time.process_time() - start
    finally:
        for module, name, original in originals:
            setattr(module, name, original)
    stages = dict(clock.seconds)
    stages["formula + assembly"] = max(0.0, total - sum(stages.values()))
    stages["total"] = total
    return stages


def json_baseline(work: Sequence[tuple[TravelRow, str, list[str]]]) -> float:
    """Seconds to json.loads both texts of every joint action (machine-speed reference)."""
    start = time.process_time()
    for _, _, texts in work:
        for text in texts:
            try:
                json.loads(text)
            except ValueError:
                pass
    return time.process_time() - start


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="hub-format jsonl (default: %(default)s)")
    parser.add_argument("--actions", type=int, default=3000, help="joint actions to score")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not Path(args.data).is_file():
        parser.error(f"no data file at {args.data} (pass --data PATH to a hub-format jsonl)")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core

    rows = load_rows(args.data, split="train")
    rng = random.Random(args.seed)
    work: list[tuple[TravelRow, str, list[str]]] = []
    while len(work) < args.actions:
        for row in rows:
            work.extend((row, kind, texts) for kind, texts in variants(row, rng))
    work = work[: args.actions]
    for row in rows:  # warm per-row caches (catalog, scaffold, evaluator index, reference n-grams)
        score_joint_action(row, ["", ""])

    per_kind: dict[str, list[float]] = {}
    five_day: list[float] = []
    start, wall_start = time.process_time(), time.perf_counter()
    for row, kind, texts in work:
        t0 = time.process_time()
        result = score_joint_action(row, texts)
        elapsed = time.process_time() - t0
        per_kind.setdefault(kind, []).append(elapsed)
        if row.days == 5:
            five_day.append(elapsed)
        assert -0.25 <= result.reward <= 1.0
    total, wall = time.process_time() - start, time.perf_counter() - wall_start
    baseline = json_baseline(work)
    valid_rewards = [score_joint_action(row, texts).reward for row, kind, texts in work[: 7 * len(rows)] if kind == "valid"]

    print(f"rows: {len(rows)} from {args.data}; joint actions scored: {len(work)}; pid {os.getpid()} on one core")
    print(f"constructed valid plans: mean reward {sum(valid_rewards) / len(valid_rewards):.3f}, "
          f"{sum(r >= 1.0 for r in valid_rewards)}/{len(valid_rewards)} at 1.0")  # fmt: skip
    overall = len(work) / total
    print(f"\n{'subset':<12}{'actions':>9}{'per CPU-second':>16}{'vs target':>11}")
    print(f"{'all':<12}{len(work):>9}{overall:>16.0f}{overall / TARGET_PER_SECOND:>10.2f}x")
    if five_day:
        rate = len(five_day) / sum(five_day)
        print(f"{'5-day rows':<12}{len(five_day):>9}{rate:>16.0f}{rate / TARGET_PER_SECOND:>10.2f}x")
    for kind, times in sorted(per_kind.items()):
        print(f"{kind:<12}{len(times):>9}{len(times) / sum(times):>16.0f}")
    print(f"wall-clock: {len(work) / wall:.0f} per second; reward / json.loads-baseline time ratio: {total / baseline:.1f}")

    stages = stage_times(work)
    print(f"\n{'stage (one instrumented pass)':<30}{'seconds':>9}{'share':>8}")
    for name, seconds in stages.items():
        if name != "total":
            print(f"{name:<30}{seconds:>9.3f}{seconds / stages['total']:>8.1%}")
    print(f"{'total':<30}{stages['total']:>9.3f}")


if __name__ == "__main__":
    main()
