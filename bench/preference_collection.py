"""One preference collection for one train row at several `preference_generation_batch_size` values.

A collection samples `preference_num_candidates` actions per role (in generation calls of at most the
batch size; candidate k of both roles forms joint action k), scores every joint action with the shared
reward, and selects the preference pairs: what MADPO and MARLHF do per train row (the iterative
methods do it twice, once for the comparator). The actors, data and settings come from the project's
own config, composed like `launch.py` composes it, so any override of a run applies here too.

Printed per batch size: seconds, joint candidates per second, generation calls, pairs and peak GPU
memory, plus the ratio against the first batch size.

    python bench/preference_collection.py                       # random_qwen3_4b on one GPU, batch 20 and 1
    python bench/preference_collection.py --batch-sizes 20,5,1 algorithm=madpo_iter
    python bench/preference_collection.py --device cpu model=tiny_random hardware=cpu data=synthetic \
        algorithm.preference_num_candidates=4 --batch-sizes 4,1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import torch
from bench.measure import above_weights, gib, measure
from bench.project import add_project_arguments, compose_config, project_actors
from travel.algorithms.preference.collection import PreferenceSettings, PolicySource, collect_preferences, generation_chunks
from travel.run import Run

def measure_collection(row: Any, actors: Any, settings: PreferenceSettings, batch_size: int, reward_config: Any):
    source = PolicySource(actors, batch_size)
    seconds, peak, collection = measure(
        actors.actors[0].device, lambda: collect_preferences([row], source, settings, reward_config=reward_config)
    )
    return {
        "batch_size": batch_size,
        "seconds": seconds,
        "joint_candidates": settings.num_candidates,
        "generation_calls": 2 * len(generation_chunks(settings.num_candidates, batch_size)),
        "pairs": len(collection.batch),
        "reward_min": min(collection.target_rewards),
        "reward_max": max(collection.target_rewards),
        "peak_bytes": peak,
    }


def format_table(results: list[dict[str, Any]], weights_bytes: int | None) -> str:
    lines = [
        "| batch size | generation calls | seconds | joint candidates / s | pairs | rewards | peak GiB | peak - weights GiB |",
        "| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r['batch_size']} | {r['generation_calls']} | {r['seconds']:.1f} | "
            f"{r['joint_candidates'] / r['seconds']:.2f} | {r['pairs']} | {r['reward_min']:.3f}..{r['reward_max']:.3f} | "
            f"{gib(r['peak_bytes'])} | {above_weights(r['peak_bytes'], weights_bytes)} |"
        )
    first = results[0]
    for r in results[1:]:
        lines.append(
            f"| {r['batch_size']} vs {first['batch_size']} | | {r['seconds'] / first['seconds']:.2f}x time | | | | "
            + ("n/a" if not (r["peak_bytes"] and first["peak_bytes"]) else f"{r['peak_bytes'] / first['peak_bytes']:.2f}x")
            + " | |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sizes", default="20,1", help="comma-separated preference_generation_batch_size values")
    parser.add_argument("--row", type=int, default=0, help="index into the curriculum's train rows")
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    add_project_arguments(parser)
    args = parser.parse_args(argv)

    cfg = compose_config(["algorithm=madpo", *args.overrides], args.device)
    run = Run(cfg, run_dir=str(REPO_ROOT / "outputs" / "bench_preference_collection"))
    train = run.data.split.train
    if not 0 <= args.row < len(train):
        raise SystemExit(f"--row {args.row}: the curriculum has {len(train)} train rows")
    row = train[args.row]
    # the target candidates alone: the comparator's sampling is timed by the same decoder
    settings = dataclasses.replace(PreferenceSettings.from_config(run.algorithm), comparator_num_candidates=0)
    batch_sizes = [int(size) for size in args.batch_sizes.split(",") if size.strip()]

    torch.manual_seed(int(cfg.seed))
    started = time.perf_counter()
    actors = project_actors(cfg)
    device = actors.actors[0].device
    weights_bytes = torch.cuda.memory_allocated(device) if device.type == "cuda" else None
    prompt_tokens = [len(actor.prompt_ids(row)) for actor in actors.actors]
    print(
        f"model {cfg.model.name} on {device} (loaded in {time.perf_counter() - started:.1f} s); algorithm "
        f"{cfg.algorithm.name}; train row {row.source_index} ({row.days} days, {row.level}); prompt tokens "
        f"{prompt_tokens}; {settings.num_candidates} candidates per role, batch sizes {batch_sizes}",
        flush=True,
    )
    actors.actors[0].sample(row, 1, greedy=True)  # value tables, kernels and graph code paths warm
    results = []
    for batch_size in batch_sizes:
        results.append(measure_collection(row, actors, settings, batch_size, run.reward_config))
        print(json.dumps(results[-1]), flush=True)  # each result as soon as it is measured
    actors.close()
    print()
    print(format_table(results, weights_bytes))
    if args.json:
        summary = {
            "model": str(cfg.model.name),
            "row": row.source_index,
            "prompt_tokens": prompt_tokens,
            "weights_bytes": weights_bytes,
            "results": results,
        }
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
