"""One training buffer on one GPU, timed by phase, and the wall time it projects for a whole run.

MAGRPO (the default): `algorithm.rollout_buffer_size` real train rows x K = `algorithm.num_generations` joint
actions are sampled (generation), scored by the task reward (reward), and both policies take their MAGRPO
update (update), as one buffer of a run does. The update uses distinct advantages (those of rewards 0..K-1, as
bench/update.py and bench/layouts.py do) so that every candidate enters the loss even where a random model's
rewards tie. Printed: seconds per env step of each phase, peak GPU memory, and the projected wall time of the
paper's 5,040 online env steps (evaluation not included).

`--algorithm madpo_iter`: per row, one preference collection (target candidates and the current-copy
comparator's, the same weights), then joint DPO updates over the row's pairs in batches of
`algorithm.train_batch_size`; printed per row and per pair, with the projection over the config's iterations
and train rows.

The first buffer (or row) warms up kernels and CUDA graphs; the next `--buffers` are measured. `--variant` (MAGRPO)
measures the same actors again, in the same process, with hardware settings changed in place (in order: each variant
starts from the settings of the one before; it warms up again only where checkpointing changes, which changes the
update's form), one table row each:
e.g. both actors resident (`offload_inactive_actor=false`), activations kept (`gradient_checkpointing=false`,
which also switches the update to the form over the prompt's cache) or kept in all but the first N layers
(`checkpoint_layers=N`). A variant that runs out of GPU memory says so
in its row.

    python bench/train_step.py                                   # random_qwen3_4b, 10 rows x K=4, real rows
    python bench/train_step.py --variant offload_inactive_actor=false,gradient_checkpointing=false
    python bench/train_step.py --algorithm madpo_iter --buffers 2
    python bench/train_step.py model=tiny_random hardware=cpu data=synthetic --device cpu algorithm.rollout_buffer_size=2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import torch
from bench.measure import synchronize
from bench.project import add_project_arguments, compose_config, project_actors
from travel.agents.models import checkpoint_first_layers, decoder_layers, set_activation_checkpointing
from travel.algorithms.preference.dpo import joint_dpo_update
from travel.algorithms.online.magrpo import BufferSample, group_advantages, value_loss_step
from travel.algorithms.preference.collection import PolicySource, PreferenceSettings, collect_preferences
from travel.algorithms.core.rollout import JointRolloutSampler
from travel.generation.options import PREFIX_KERNELS
from travel.logging.memory_plan import GIB, MemoryPlan
from travel.reward import score_joint_actions
from travel.run import Run

PAPER_ENV_STEPS = 5040  # 21 epochs x 60 rows x K=4 (MAGRPO and MARLHF's online phase)


class TimedScore:
    """The task reward through the rollout seam, with the seconds it took."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self, row: Any, pairs: Any, config: Any) -> Any:
        started = time.perf_counter()
        try:
            return score_joint_actions(row, pairs, config)
        finally:
            self.seconds += time.perf_counter() - started


def timed(device: torch.device, call: Any) -> tuple[float, Any]:
    synchronize(device)
    started = time.perf_counter()
    result = call()
    synchronize(device)
    return time.perf_counter() - started, result


VARIANT_SETTINGS = ("offload_inactive_actor", "gradient_checkpointing", "checkpoint_layers", "prefix_attention")  # what --variant may change


def parse_variant(text: str) -> dict[str, Any]:
    """`--variant offload_inactive_actor=false,checkpoint_layers=12` -> {name: value}: true|false for the flags,
    an integer >= 0 or `all` for checkpoint_layers, a kernel name for the decoders' prefix_attention."""
    settings: dict[str, Any] = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        name, value = name.strip().removeprefix("hardware."), value.strip().lower()
        if name == "checkpoint_layers" and (value == "all" or value.isdigit()):
            settings[name] = None if value == "all" else int(value)
        elif name == "prefix_attention" and value in PREFIX_KERNELS:
            settings[name] = value
        elif name in VARIANT_SETTINGS and name != "checkpoint_layers" and value in ("true", "false"):
            settings[name] = value == "true"
        else:
            raise SystemExit(
                f"--variant {text!r}: each item must be NAME=true|false with NAME one of offload_inactive_actor, "
                f"gradient_checkpointing, or checkpoint_layers=N|all, or prefix_attention={'|'.join(PREFIX_KERNELS)}"
            )
    return settings


def apply_variant(layout: Any, settings: dict[str, Any]) -> None:
    """The settings of a variant, applied in place to the built actors (same weights, same compiled code)."""
    if "offload_inactive_actor" in settings:
        layout.offload_inactive = settings["offload_inactive_actor"] and not layout.parallel
    for actor in layout.actors:
        if "gradient_checkpointing" in settings:
            set_activation_checkpointing(actor.model, settings["gradient_checkpointing"])
        if "checkpoint_layers" in settings:
            count = settings["checkpoint_layers"]
            checkpoint_first_layers(actor.model, len(decoder_layers(actor.model)) if count is None else count)
        if "prefix_attention" in settings:
            actor.decoder.prefix_attention = settings["prefix_attention"]


def compiled_shape(layout: Any) -> list[tuple[Any, ...]]:
    """What a variant must compile again for: which decoder layers of each actor checkpoint (the update's form), and
    its decoder's prefix kernel (the decode step's graph)."""
    return [
        (*(bool(layer.gradient_checkpointing) for layer in decoder_layers(actor.model)), actor.decoder.prefix_attention)
        for actor in layout.actors
    ]


def predicted_peak(run: Run, rows: list[Any]) -> float | None:
    """The memory plan's peak (GiB, the largest over devices) for the rows this benchmark runs."""
    peaks = MemoryPlan(run, train_rows=rows).peaks()
    return max(peaks.values()) / GIB if peaks else None


def magrpo_buffers(cfg: Any, run: Run, args: argparse.Namespace) -> dict[str, Any]:
    rows = list(run.data.split.train)[: int(cfg.algorithm.rollout_buffer_size)]
    k = int(cfg.algorithm.num_generations)
    layout = project_actors(cfg)
    device = layout.actors[0].device
    score = TimedScore()
    sampler = JointRolloutSampler(layout, run.reward_config, score=score, parallel=layout.parallel)
    distinct = tuple(group_advantages([float(j) for j in range(k)]))

    def measure(label: str, warm_up: bool = True) -> dict[str, Any]:
        """A warm-up buffer (`warm_up`), then `--buffers` measured ones, under the actors' settings now."""
        measured = []
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        for buffer in range(0 if warm_up else 1, 1 + args.buffers):
            score.seconds = 0.0
            sampling, rollouts = timed(device, lambda: sampler.rollouts(rows, k))
            samples = [
                [BufferSample(r.agents[p].prompt_ids, r.agents[p].candidates, distinct, 0.0, r.env_step) for r in rollouts]
                for p in range(len(layout.actors))
            ]
            update, _ = timed(device, lambda: layout.update_each(lambda actor: value_loss_step(actor, samples[actor.agent_id])))
            steps = len(rows) * k
            if buffer:
                measured.append({"generation": (sampling - score.seconds) / steps, "reward": score.seconds / steps, "update": update / steps})
            print(
                f"{label}, buffer {buffer}{' (warm-up)' if not buffer else ''}: {steps} env steps, generation and reward "
                f"{sampling:.1f} s, update {update:.1f} s", flush=True,
            )
        per_step = {phase: statistics.fmean(m[phase] for m in measured) for phase in ("generation", "reward", "update")}
        total = sum(per_step.values())
        return {
            "setting": label,
            "prompt_tokens": statistics.fmean(len(a.prompt_ids) for r in rollouts for a in r.agents),
            "s_per_env_step": {**per_step, "total": total},
            "peak_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
            "projected_hours": total * PAPER_ENV_STEPS / 3600,
        }

    predicted = predicted_peak(run, rows)
    settings = [measure("as configured")]
    compiled = compiled_shape(layout)
    for text in args.variant:
        apply_variant(layout, parse_variant(text))
        before, compiled = compiled, compiled_shape(layout)
        try:  # the update changes form only where checkpointing changed, the decode step where its kernel did
            settings.append(measure(text, warm_up=compiled != before))
        except torch.OutOfMemoryError as error:
            print(f"{text}: out of GPU memory ({error})", flush=True)
            settings.append({"setting": text, "error": "out of GPU memory"})
            torch.cuda.empty_cache()
    sampler.close()
    layout.close()
    return {"algorithm": "magrpo", "rows": len(rows), "k": k, **settings[0], "predicted_peak_gib": predicted, "settings": settings}


def madpo_iter_rows(cfg: Any, run: Run, args: argparse.Namespace) -> dict[str, Any]:
    train = list(run.data.split.train)
    settings = PreferenceSettings.from_config(run.algorithm)
    layout = project_actors(cfg)
    device = layout.actors[0].device
    score = TimedScore()
    batch_size = int(cfg.algorithm.preference_generation_batch_size)
    target = PolicySource(layout, batch_size)
    comparator = PolicySource(layout, batch_size)  # the current copy: the same weights at an iteration's start
    train_batch = int(cfg.algorithm.train_batch_size)
    measured = []
    predicted = predicted_peak(run, [train[index % len(train)] for index in range(1 + args.buffers)])
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for index in range(1 + args.buffers):
        row = train[index % len(train)]
        score.seconds = 0.0
        collecting, collection = timed(
            device,
            lambda: collect_preferences(
                [row], target, settings, comparator=comparator, reward_config=run.reward_config, score=score
            ),
        )
        batch = collection.batch
        update = 0.0
        for start in range(0, len(batch), train_batch):
            chunk = dataclasses.replace(batch, pairs=batch.pairs[start : start + train_batch])
            seconds, _ = timed(device, lambda: joint_dpo_update(layout, chunk, float(cfg.algorithm.dpo_beta)))
            update += seconds
        if index:
            measured.append(
                {"collection": collecting - score.seconds, "reward": score.seconds, "update": update, "pairs": len(batch)}
            )
        print(f"row {row.source_index}{' (warm-up)' if not index else ''}: {len(batch)} pairs, {collecting + update:.1f} s", flush=True)
    pairs = statistics.fmean(m["pairs"] for m in measured)
    per_row = {phase: statistics.fmean(m[phase] for m in measured) for phase in ("collection", "reward", "update")}
    iterations = int(cfg.algorithm.get("num_iterations", 1))
    projected = iterations * len(train) * sum(per_row.values())
    result = {
        "algorithm": "madpo_iter",
        "candidates_per_row": settings.num_candidates + settings.comparator_num_candidates,
        "pairs_per_row": pairs,
        "s_per_row": {**per_row, "total": sum(per_row.values())},
        "update_s_per_pair": per_row["update"] / pairs if pairs else None,
        "peak_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
        "predicted_peak_gib": predicted,
        "projected_hours": projected / 3600,
        "projection": f"{iterations} iterations x {len(train)} train rows",
    }
    target.close()
    comparator.close()
    layout.close()
    return result


def format_magrpo(r: dict[str, Any]) -> str:
    lines = [
        f"MAGRPO, one buffer of {r['rows']} rows x K={r['k']} (mean role prompt {r['prompt_tokens']:.0f} tokens)",
        "| setting | generation s / env step | reward s / env step | update s / env step | total s / env step | "
        f"peak GiB | projected {PAPER_ENV_STEPS} env steps |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    if r.get("predicted_peak_gib") is not None:
        lines.insert(1, f"(memory plan for these rows, as configured: {r['predicted_peak_gib']:.1f} GiB)")
    for setting in r["settings"]:
        if "error" in setting:
            lines.append(f"| {setting['setting']} | {setting['error']} | | | | | |")
            continue
        s = setting["s_per_env_step"]
        peak = "n/a" if setting["peak_gib"] is None else f"{setting['peak_gib']:.1f}"
        lines.append(
            f"| {setting['setting']} | {s['generation']:.3f} | {s['reward']:.4f} | {s['update']:.3f} | {s['total']:.3f} | "
            f"{peak} | {setting['projected_hours']:.2f} h |"
        )
    return "\n".join(lines)


def format_madpo_iter(r: dict[str, Any]) -> str:
    s = r["s_per_row"]
    peak = "n/a" if r["peak_gib"] is None else f"{r['peak_gib']:.1f}"
    per_pair = "n/a" if r["update_s_per_pair"] is None else f"{r['update_s_per_pair']:.2f}"
    planned = "n/a" if r.get("predicted_peak_gib") is None else f"{r['predicted_peak_gib']:.1f}"
    return "\n".join(
        [
            f"MADPO-iter, per train row ({r['candidates_per_row']} joint candidates, {r['pairs_per_row']:.1f} pairs)",
            "| collection s / row | reward s / row | update s / row | update s / pair | peak GiB | planned GiB | projected run |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            f"| {s['collection']:.1f} | {s['reward']:.2f} | {s['update']:.1f} | {per_pair} | {peak} | {planned} | "
            f"{r['projected_hours']:.2f} h ({r['projection']}) |",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithm", choices=("magrpo", "madpo_iter"), default="magrpo")
    parser.add_argument("--buffers", type=int, default=1, help="measured buffers (MAGRPO) or rows (MADPO-iter)")
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    parser.add_argument(
        "--variant", action="append", default=[],
        help="MAGRPO: after the configured setting, measure again (with a warm-up where checkpointing or the prefix kernel "
        "changes) with these settings changed in place on the same actors, e.g. offload_inactive_actor=false,"
        f"gradient_checkpointing=false, checkpoint_layers=12 or prefix_attention=chunked_flash (names: {', '.join(VARIANT_SETTINGS)}); "
        "repeatable",
    )
    add_project_arguments(parser)
    args = parser.parse_intermixed_args(argv)
    for text in args.variant:  # checked before any model loads
        parse_variant(text)
    if args.variant and args.algorithm != "magrpo":
        raise SystemExit("--variant measures MAGRPO buffers; it does not apply to --algorithm madpo_iter")
    cfg = compose_config([f"algorithm={args.algorithm}", *args.overrides], args.device)
    run = Run(cfg, run_dir=str(REPO_ROOT / "outputs" / "bench_train_step"))
    started = time.perf_counter()
    if args.algorithm == "magrpo":
        result = magrpo_buffers(cfg, run, args)
        table = format_magrpo(result)
    else:
        result = madpo_iter_rows(cfg, run, args)
        table = format_madpo_iter(result)
    print(f"\nmodel {cfg.model.name}, {time.perf_counter() - started:.0f} s in all\n")
    print(table)
    if args.json:
        args.json.write_text(json.dumps({"model": str(cfg.model.name), **result}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
