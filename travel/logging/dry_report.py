"""The dry-run report: what a run would train and evaluate on, and what it would cost, without weights."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from travel.agents.layouts import layout_class
from travel.logging.memory_plan import format_memory_plan
from travel.reward import score_joint_action
from travel.task.budget_contract import budget_contract
from travel.task.fields import owned_slots
from travel.task.joint_prompt import build_joint_prompt
from travel.task.prompts import build_role_prompt
from travel.task.roles import ROLES, format_action

if TYPE_CHECKING:
    from travel.run import Run


def _indices(rows) -> list[int]:
    return [row.source_index for row in rows]


def _spread(values) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def environment_checks(rows, reward_config, joint: bool = False) -> dict[str, Any]:
    """Reward range, the all-dash probe, role (and, for a joint actor, joint) prompt lengths and budget-contract
    feasibility over `rows`."""

    probes, prompt_chars, contracts = [], {role.name.lower(): {} for role in ROLES}, {}
    for row in rows:
        dash = [format_action(a, [(d, f, "-") for d, f in owned_slots(a, row.days)]) for a in range(len(ROLES))]
        probes.append(score_joint_action(row, dash, reward_config))
        for agent_id, role in enumerate(ROLES):
            prompt = build_role_prompt(row, agent_id)
            prompt_chars[role.name.lower()][str(row.source_index)] = len(prompt.system) + len(prompt.user)
        if joint:
            prompt = build_joint_prompt(row)
            prompt_chars.setdefault("joint", {})[str(row.source_index)] = len(prompt.system) + len(prompt.user)
        reason = budget_contract(row).reason
        contracts[reason] = contracts.get(reason, 0) + 1
    dash_rewards = sorted({probe.reward for probe in probes})
    return {
        "reward_range": list(reward_config.reward_range),
        "all_dash_probe_reward": dash_rewards[0] if len(dash_rewards) == 1 else dash_rewards,
        "all_dash_probe": {
            key: statistics.fmean(probe.metrics[key] for probe in probes)
            for key in ("team_action_success", "required_grounded_recall", "required_cooperative_contribution")
        },
        "prompt_chars": {
            role: {**_spread(list(per_row.values())), "per_row": per_row} for role, per_row in prompt_chars.items()
        },
        "budget_contract": contracts,
    }


def actor_report(run: "Run") -> dict[str, Any]:
    """The policy layout (actor option): how many trainable policies, and each action's output token budget."""

    layout = layout_class(str(run.cfg.actor.layout))
    role_tokens = run.generation.max_new_tokens
    return {
        "layout": layout.name,
        "trainable_policies": layout.num_policies,
        "joint_action": layout.joint,
        "output_tokens_per_action": layout.output_budget(role_tokens),
    }


def algorithm_budget_report(run: "Run") -> dict[str, Any]:
    """The selected algorithm's budget (its registry entry) and its comparator, after checking that the
    algorithm, comparator, generation and device options work together (Run.check_options)."""
    run.check_options()
    spec = run.comparator_spec
    budget = run.budget.to_report()
    budget.pop("train_rows")
    budget["budget_details"] = budget.pop("details")
    return {**budget, "comparator": spec.name, "generation_mode": spec.generation_mode, "memory_plan": run.memory_plan}


def build_dry_report(run: "Run") -> dict[str, Any]:
    """Loads and checks the data (raising on unusable train/eval rows) and returns the JSON-ready report."""
    budget = algorithm_budget_report(run)  # first: option combinations fail before the catalog checks
    data = run.data
    split = data.split
    failures = data.catalog_failures(data.rows)
    data.check_catalogs()
    candidates = [row for row in split.candidates if row.source_index not in failures]
    chars = [row.reference_chars for row in split.candidates]
    report = {
        "source": data.source.describe(),
        "source_rows": len(data.rows),
        "candidate_rows": len(split.candidates),
        "train_rows": len(split.train),
        "eval_rows": len(split.eval),
        "short_rows": len(split.short),
        "train_source_indices": _indices(split.train),
        "eval_panels": [_indices(panel) for panel in split.panels],
        "short_source_indices": _indices(split.short),
        "excluded_rows": {str(index): reason for index, reason in sorted(split.excluded.items())},
        **budget,
        "actor": actor_report(run),
        "wandb_run": run.wandb_identity(),
        "catalog_parse_failures": sorted(failures),
        "catalog_parse_errors": {str(i): message for i, message in sorted(failures.items())},
        "catalog_counts": {str(row.source_index): row.catalog.counts() for row in candidates},
        "reference_chars": {
            "min": min(chars),
            "max": max(chars),
            "median": statistics.median(chars),
        },
        "required_slots": {
            str(row.source_index): [[day, field] for day, field in sorted(row.required_slots)] for row in candidates
        },
    }
    held_out = [row for rows in split.held_out.values() for row in rows]
    if split.held_out:  # curriculum.held_out_eval: the terminal evaluation scores these rows too
        report["held_out_rows"] = {group: _indices(rows) for group, rows in split.held_out.items()}
    checked = (*split.train, *split.eval, *held_out)
    report.update(environment_checks(checked, run.reward_config, joint=report["actor"]["joint_action"]))
    return report


def _bound(report: dict[str, Any], key: str) -> str:
    return "at most " if report.get(f"{key}_is_upper_bound") else ""


def _evaluations(report: dict[str, Any]) -> str:
    if report["eval_env_steps"] is not None:
        return f"{len(report['eval_env_steps'])} evaluations"
    return f"an evaluation every {report['budget_details']['eval_every_updates']} optimizer updates"


def excluded_line(excluded: dict[str, str], shown: int = 3) -> str:
    """The rows the curriculum filters dropped, the first few with their reason."""
    if not excluded:
        return "  excluded    no source row"
    items = list(excluded.items())
    detail = "; ".join(f"row {index}: {reason}" for index, reason in items[:shown])
    return f"  excluded    {len(items)} source rows ({detail}" + ("; ..." if len(items) > shown else "") + ")"


def format_dry_report(report: dict[str, Any]) -> str:
    """A short human-readable summary of the report."""
    chars = report["reference_chars"]
    phases = ", ".join(f"{name} {steps}" for name, steps in report["env_steps_by_phase"].items())
    lines = [
        f"dry run: {report['source']}",
        f"  rows        source {report['source_rows']}, candidates {report['candidate_rows']}, "
        f"train {report['train_rows']} (short {report['short_rows']}), eval {report['eval_rows']}",
        f"  reference   {chars['min']:,}-{chars['max']:,} chars (median {chars['median']:,})",
        excluded_line(report["excluded_rows"]),
        *(
            ["  held out    beyond the eval pool: " + ", ".join(f"{group} {len(rows)}" for group, rows in report["held_out_rows"].items())
             + " rows, scored by the terminal evaluation apart from eval/*"]
            if "held_out_rows" in report else []
        ),
        f"  catalogs    {len(report['catalog_parse_failures'])} parse failures",
        f"  budget      {report['algorithm']}: {report['collected_candidates']:,} collected candidates, "
        f"{_bound(report, 'env_steps')}{report['env_steps']} env steps ({report['env_steps_unit']}: {phases}), "
        f"{_bound(report, 'optimizer_updates')}{report['optimizer_updates_per_agent']} optimizer updates per agent, "
        + _evaluations(report),
        f"  actor       {report['actor']['layout']}: {report['actor']['trainable_policies']} trainable "
        f"{'policy' if report['actor']['trainable_policies'] == 1 else 'policies'}, "
        f"{report['actor']['output_tokens_per_action']:,} output tokens per "
        f"{'joint' if report['actor']['joint_action'] else 'role'} action",
        f"  comparator  {report['comparator']} ({report['generation_mode']})",
        "  eval panels " + "  ".join(f"P{i + 1} {panel}" for i, panel in enumerate(report["eval_panels"])),
        f"  reward      range {report['reward_range']}, all-dash probe {report['all_dash_probe_reward']}",
        "  prompts     "
        + ", ".join(f"{role} {v['min']:,}-{v['max']:,} chars (median {v['median']:,})" for role, v in report["prompt_chars"].items()),
        "  contracts   " + ", ".join(f"{reason} {count}" for reason, count in sorted(report["budget_contract"].items())),
        format_memory_plan(report["memory_plan"]),
    ]
    return "\n".join(lines)
