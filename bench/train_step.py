"""One training buffer on one GPU, timed by phase, and the wall time it projects for a whole run.

MAGRPO (the default): `algorithm.rollout_buffer_size` real train rows x K = `algorithm.num_generations` joint
actions are sampled (generation), scored by the task reward (reward), and both policies take their MAGRPO
update (update), as one buffer of a run does. The update uses distinct advantages (those of rewards 0..K-1, as
bench/update.py and bench/layouts.py do) so that every candidate enters the loss even where a random model's
rewards tie. Printed: seconds per env step of each phase, peak GPU memory, and the projected wall time of the
paper's 5,040 online env steps (evaluation not included).

`--algorithm madpo_iter`: per row, one preference collection (target candidates and the current-copy
comparator's, the same weights and a random stream of its own), then joint DPO updates over the row's pairs in
batches of `algorithm.train_batch_size`; printed per row and per pair. The comparator samples in the target's
decoder calls; `algorithm.shared_comparator_calls=false` measures it in calls of its own.

`--algorithm marlhf_iter`: the same collection per row; then a fresh reward model built from the base weights
(the actors parked on the CPU, as a run does) and fitted on the measured rows' pairs, timed per pair; then
MAGRPO buffers scored by that reward model (online env steps).

For both preference algorithms a second table says where a collection row's seconds go: the decoder calls (their
weight refresh, prefills, decode steps and the rest of each call) and the collection outside them.

Every projection uses the paper's row count, 60 train rows (and the config's iterations, epochs and K),
whatever rows the benchmark loads, and says so: the paper's runs are the reference a figure is set against.

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
    python bench/train_step.py --algorithm madpo_iter --buffers 2 algorithm.shared_comparator_calls=false
    python bench/train_step.py --algorithm marlhf_iter --buffers 2
    python bench/train_step.py --algorithm madpo_iter --profile  # and one more row under torch.profiler
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
from hydra.utils import instantiate
from bench.measure import DecoderCalls, profile_call, synchronize
from bench.project import add_project_arguments, compose_config, project_actors
from travel.agents.models import checkpoint_first_layers, decoder_layers, set_activation_checkpointing
from travel.algorithms.online.magrpo import BufferSample, group_advantages, value_loss_step
from travel.algorithms.online.marlhf import base_loader, comparison_texts, learned_rewards, reward_fit_settings
from travel.algorithms.preference.dpo import joint_dpo_update
from travel.algorithms.preference.reward_model import build_reward_model, fit_reward_model
from travel.algorithms.preference.collection import PolicySource, PreferenceSettings, collect_preferences
from travel.algorithms.preference.comparators import Comparator, ComparatorSpec
from travel.algorithms.preference.loop import comparator_source
from travel.algorithms.core.rollout import JointRolloutSampler
from travel.generation.options import PREFIX_KERNELS
from travel.logging.memory_plan import GIB, MemoryPlan
from travel.reward import score_joint_actions
from travel.run import Run

PAPER_TRAIN_ROWS = 60  # the paper's train rows: every projection uses them, whatever rows the benchmark loads
PAPER_ENV_STEPS = 21 * PAPER_TRAIN_ROWS * 4  # 5,040: 21 epochs x 60 rows x K=4 (MAGRPO and MARLHF's online phase)


class TimedScore:
    """A score function through the rollout seam (the task reward unless `score` is given), with the seconds it took."""

    def __init__(self, score: Any = score_joint_actions) -> None:
        self.score = score
        self.seconds = 0.0

    def __call__(self, row: Any, pairs: Any, config: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.score(row, pairs, config)
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


def online_buffers(layout: Any, sampler: Any, score: TimedScore, rows: list[Any], k: int, buffers: int, label: str, warm_up: bool = True) -> dict[str, Any]:
    """A warm-up buffer (`warm_up`), then `buffers` measured ones of `rows` x K joint actions: generation, the
    reward through `score`, and both policies' MAGRPO update, under the actors' settings now; seconds per env step,
    and the peak GPU memory since the caller last reset it."""
    device = layout.actors[0].device
    distinct = tuple(group_advantages([float(j) for j in range(k)]))
    measured = []
    for buffer in range(0 if warm_up else 1, 1 + buffers):
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
    return {
        "setting": label,
        "prompt_tokens": statistics.fmean(len(a.prompt_ids) for r in rollouts for a in r.agents),
        "s_per_env_step": {**per_step, "total": sum(per_step.values())},
        "peak_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
    }


def magrpo_buffers(cfg: Any, run: Run, args: argparse.Namespace) -> dict[str, Any]:
    rows = list(run.data.split.train)[: int(cfg.algorithm.rollout_buffer_size)]
    k = int(cfg.algorithm.num_generations)
    layout = project_actors(cfg)
    device = layout.actors[0].device
    score = TimedScore()
    sampler = JointRolloutSampler(layout, run.reward_config, score=score, parallel=layout.parallel)

    def measure(label: str, warm_up: bool = True) -> dict[str, Any]:
        if device.type == "cuda":  # each setting's own peak
            torch.cuda.reset_peak_memory_stats(device)
        measured = online_buffers(layout, sampler, score, rows, k, args.buffers, label, warm_up)
        return {**measured, "projected_hours": measured["s_per_env_step"]["total"] * PAPER_ENV_STEPS / 3600}

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


def collected_rows(cfg: Any, run: Run, layout: Any, args: argparse.Namespace, dpo: bool) -> tuple[list[dict[str, Any]], list[tuple[Any, Any]]]:
    """Per train row: one preference collection (target and current-copy comparator candidates, the same weights),
    timed apart from its task reward, and with `dpo` the joint DPO updates over the row's pairs in batches of
    `algorithm.train_batch_size`. A warm-up row, then `--buffers` measured rows: (their phases, (row, pairs))."""
    train = list(run.data.split.train)
    settings = PreferenceSettings.from_config(run.algorithm)
    device = layout.actors[0].device
    score = TimedScore()
    batch_size = int(cfg.algorithm.preference_generation_batch_size)
    target = PolicySource(layout, batch_size)
    # the current copy (the same weights at an iteration's start) with its own random stream, as the trainer builds
    # it: on the actors' devices its candidates share the target's decoder calls (algorithm.shared_comparator_calls)
    devices = [str(actor.device) for actor in layout.actors]
    spec = ComparatorSpec(name="current_copy", policy="current_copy", devices=tuple(run.comparator_spec.devices or devices))
    comparator = Comparator(spec, seed=int(cfg.seed), actor_devices=devices)
    models = [actor.model for actor in layout.actors]
    train_batch = int(cfg.algorithm.train_batch_size)
    measured, collected = [], []
    def collect(row: Any) -> Any:
        with comparator.collection(1, models) as policies:
            source = comparator_source(layout, policies, batch_size)
            return collect_preferences([row], target, settings, comparator=source, reward_config=run.reward_config, score=score)

    for index in range(1 + args.buffers):
        row = train[index % len(train)]
        score.seconds = 0.0
        with DecoderCalls(actor.decoder for actor in layout.actors) as calls:
            collecting, collection = timed(device, lambda: collect(row))
        batch = collection.batch
        update = 0.0
        for start in range(0, len(batch), train_batch) if dpo else ():
            chunk = dataclasses.replace(batch, pairs=batch.pairs[start : start + train_batch])
            seconds, _ = timed(device, lambda: joint_dpo_update(layout, chunk, float(cfg.algorithm.dpo_beta)))
            update += seconds
        if index:
            decoding = calls.totals()
            profile = {**decoding, "outside": collecting - score.seconds - decoding["seconds"]}
            phases = {"collection": collecting - score.seconds, "reward": score.seconds, "pairs": len(batch), "profile": profile}
            measured.append({**phases, "update": update} if dpo else phases)
            collected.append((row, batch))
        print(f"row {row.source_index}{' (warm-up)' if not index else ''}: {len(batch)} pairs, {collecting + update:.1f} s", flush=True)
    if args.profile:  # one more row under torch.profiler: the top operators, and the GPU's kernel time against the wall
        wall, kernels = profile_call(device, lambda: collect(train[(1 + args.buffers) % len(train)]))
        print(f"profiled collection row: {wall:.1f} s, of which GPU kernels {kernels:.1f} s ({kernels / wall:.0%} busy)", flush=True)
    target.close()
    return measured, collected


def collected_candidates(run: Run) -> tuple[int, int]:
    """A collection row's target and comparator joint candidates."""
    settings = PreferenceSettings.from_config(run.algorithm)
    return settings.num_candidates, settings.comparator_num_candidates


def per_row(measured: list[dict[str, Any]], phases: tuple[str, ...]) -> dict[str, float]:
    means = {phase: statistics.fmean(m[phase] for m in measured) for phase in phases}
    return {**means, "total": sum(means.values())}


def collection_profile(measured: list[dict[str, Any]]) -> dict[str, float]:
    """Where a collection row's seconds go, the mean over the measured rows (DecoderCalls.totals, plus `outside`:
    the collection outside the decoder calls and the task reward)."""
    return {key: statistics.fmean(m["profile"][key] for m in measured) for key in measured[0]["profile"]}


def format_collection_profile(p: dict[str, float]) -> str:
    per_step = f"{1000 * p['decode'] / p['steps']:.2f}" if p["steps"] else "n/a"
    return "\n".join(
        [
            "Where a collection row's seconds go (mean per row; the reward apart)",
            "| decoder calls | in the calls s | weights s | prefill s | decode steps s | steps | ms / step | rest of the calls s "
            "| outside the calls s |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            f"| {p['calls']:.0f} | {p['seconds']:.2f} | {p['weights']:.2f} | {p['prefill']:.2f} | {p['decode']:.2f} | "
            f"{p['steps']:.0f} | {per_step} | {p['other']:.2f} | {p['outside']:.2f} |",
        ]
    )


def madpo_iter_rows(cfg: Any, run: Run, args: argparse.Namespace) -> dict[str, Any]:
    layout = project_actors(cfg)
    device = layout.actors[0].device
    train = list(run.data.split.train)
    predicted = predicted_peak(run, [train[index % len(train)] for index in range(1 + args.buffers)])
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    measured, _ = collected_rows(cfg, run, layout, args, dpo=True)
    pairs = statistics.fmean(m["pairs"] for m in measured)
    row = per_row(measured, ("collection", "reward", "update"))
    iterations = int(cfg.algorithm.get("num_iterations", 1))
    result = {
        "algorithm": "madpo_iter",
        "candidates_per_row": sum(collected_candidates(run)),
        "pairs_per_row": pairs,
        "s_per_row": row,
        "update_s_per_pair": row["update"] / pairs if pairs else None,
        "collection_profile": collection_profile(measured),
        "peak_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
        "predicted_peak_gib": predicted,
        "projected_hours": iterations * PAPER_TRAIN_ROWS * row["total"] / 3600,
        "projection": f"{iterations} iterations x {PAPER_TRAIN_ROWS} train rows (the paper's; {len(train)} loaded)",
    }
    layout.close()
    return result


def marlhf_iter_phases(cfg: Any, run: Run, args: argparse.Namespace) -> dict[str, Any]:
    """Collection per row, the reward model's build and fit per pair, and the online env step on its scores."""
    layout = project_actors(cfg)
    device = layout.actors[0].device
    train = list(run.data.split.train)
    algorithm = cfg.algorithm
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    measured, collected = collected_rows(cfg, run, layout, args, dpo=False)
    rows_by_index = {row.source_index: row for row, _ in collected}
    comparisons = comparison_texts((p for _, batch in collected for p in batch), lambda i: layout.prompts(rows_by_index[i]))
    if not comparisons:
        raise SystemExit("the measured rows gave no preference pair (every candidate tied): measure more rows (--buffers)")
    reward_device = torch.device(str(algorithm.reward_model_device))
    load_base = base_loader(algorithm.get("reward_model_name"), instantiate(cfg.model, _partial_=True))
    with layout.all_on_cpu():  # as a run fits: both actors parked
        build, reward_model = timed(reward_device, lambda: build_reward_model(
            load_base, device=reward_device, max_length=int(algorithm.reward_max_length),
            freeze_backbone=bool(algorithm.reward_freeze_backbone),
            gradient_checkpointing=bool(cfg.hardware.gradient_checkpointing), seed=int(cfg.seed),
        ))
        fit, _ = timed(reward_device, lambda: fit_reward_model(reward_model, comparisons, reward_fit_settings(run.algorithm, int(cfg.seed))))
    print(f"reward model: built in {build:.1f} s, fitted on {len(comparisons)} pairs in {fit:.1f} s", flush=True)
    k = int(algorithm.num_generations)
    rows = train[: int(algorithm.rollout_buffer_size)]
    score = TimedScore(lambda row, pairs, config: learned_rewards(reward_model, layout.prompts(row), pairs))
    sampler = JointRolloutSampler(layout, run.reward_config, score=score, parallel=layout.parallel)
    online = online_buffers(layout, sampler, score, rows, k, args.buffers, "online, learned reward")
    sampler.close()
    row = per_row(measured, ("collection", "reward"))
    pairs = statistics.fmean(m["pairs"] for m in measured)
    fit_per_pair = fit / len(comparisons)  # all of algorithm.reward_num_train_epochs
    iterations = int(algorithm.get("num_iterations", 1))
    epochs = int(algorithm.num_train_epochs)
    seconds = {  # the paper's run, per phase
        "collection": iterations * PAPER_TRAIN_ROWS * row["total"],
        "reward_model": iterations * (build + PAPER_TRAIN_ROWS * pairs * fit_per_pair),
        "online": iterations * epochs * PAPER_TRAIN_ROWS * k * online["s_per_env_step"]["total"],
    }
    result = {
        "algorithm": str(algorithm.name),
        "candidates_per_row": sum(collected_candidates(run)),
        "pairs_per_row": pairs,
        "s_per_row": row,
        "collection_profile": collection_profile(measured),
        "reward_model": {"build_s": build, "fit_s_per_pair": fit_per_pair, "pairs": len(comparisons)},
        "s_per_env_step": online["s_per_env_step"],
        "peak_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
        "projected_hours_by_phase": {phase: value / 3600 for phase, value in seconds.items()},
        "projected_hours": sum(seconds.values()) / 3600,
        "projection": f"{iterations} iterations x ({PAPER_TRAIN_ROWS} train rows collected, a refit, {epochs} epochs x "
        f"{PAPER_TRAIN_ROWS} rows x K={k} online; the paper's rows, {len(train)} loaded)",
    }
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


def format_marlhf_iter(r: dict[str, Any]) -> str:
    s, rm, online = r["s_per_row"], r["reward_model"], r["s_per_env_step"]
    peak = "n/a" if r["peak_gib"] is None else f"{r['peak_gib']:.1f}"
    hours = r["projected_hours_by_phase"]
    return "\n".join(
        [
            f"MARLHF-iter ({r['candidates_per_row']} joint candidates and {r['pairs_per_row']:.1f} pairs per train row)",
            "| collection s / row | reward s / row | reward model build s | fit s / pair | online s / env step "
            "(generation, reward, update) | peak GiB |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |",
            f"| {s['collection']:.1f} | {s['reward']:.2f} | {rm['build_s']:.1f} | {rm['fit_s_per_pair']:.2f} | "
            f"{online['total']:.3f} ({online['generation']:.3f}, {online['reward']:.3f}, {online['update']:.3f}) | {peak} |",
            "",
            f"projected run: {r['projected_hours']:.2f} h (collection {hours['collection']:.2f} h, reward model "
            f"{hours['reward_model']:.2f} h, online {hours['online']:.2f} h) for {r['projection']}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithm", choices=("magrpo", "madpo_iter", "marlhf_iter"), default="magrpo")
    parser.add_argument("--buffers", type=int, default=1, help="measured buffers (MAGRPO) or rows (preference collection; MARLHF-iter's online buffers too)")
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    parser.add_argument("--profile", action="store_true",
                        help="preference algorithms: one more collection row under torch.profiler (top operators, GPU busy)")
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
        raise SystemExit(f"--variant measures MAGRPO buffers; it does not apply to --algorithm {args.algorithm}")
    cfg = compose_config([f"algorithm={args.algorithm}", *args.overrides], args.device)
    run = Run(cfg, run_dir=str(REPO_ROOT / "outputs" / "bench_train_step"))
    started = time.perf_counter()
    if args.algorithm == "magrpo":
        result = magrpo_buffers(cfg, run, args)
        table = format_magrpo(result)
    elif args.algorithm == "madpo_iter":
        result = madpo_iter_rows(cfg, run, args)
        table = format_madpo_iter(result) + "\n\n" + format_collection_profile(result["collection_profile"])
    else:
        result = marlhf_iter_phases(cfg, run, args)
        table = format_marlhf_iter(result) + "\n\n" + format_collection_profile(result["collection_profile"])
    print(f"\nmodel {cfg.model.name}, {time.perf_counter() - started:.0f} s in all\n")
    print(table)
    if args.json:
        args.json.write_text(json.dumps({"model": str(cfg.model.name), **result}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
