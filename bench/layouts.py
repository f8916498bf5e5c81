"""MAGRPO with the joint actor against the two role actors: seconds per env step of generation and of the
update, and peak GPU memory, measured back to back in one process on the same rows.

Each layout samples K candidates per row for a buffer of train rows (one joint action = one env step), scores
them with the task reward and runs the MAGRPO update of every policy, as a training buffer does, with distinct
advantages (those of rewards 0..K-1, as in bench/update.py) so that every candidate enters the loss even when a
random model's rewards tie. The first
buffer warms up (kernels, CUDA graphs); the next `--buffers` are measured. The decentralized layout is the
baseline; the table gives the centralized / decentralized ratio.

    python bench/layouts.py                                   # random_qwen3_4b on one GPU, 4 rows x K=4
    python bench/layouts.py --rows 10 data.path=/path/to/train.jsonl
    python bench/layouts.py model=tiny_random hardware=cpu data=synthetic --rows 2   # a CPU check
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import torch
from bench.project import add_project_arguments, compose_config, project_actors
from travel.algorithms.online.magrpo import BufferSample, group_advantages, value_loss_step
from travel.algorithms.core.rollout import JointRolloutSampler
from travel.run import Run

LAYOUTS = ("decentralized", "centralized")


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def measure_layout(name: str, args: argparse.Namespace) -> dict[str, float]:
    cfg = compose_config(["algorithm=magrpo", f"actor={name}", *args.overrides], args.device)
    run = Run(cfg, run_dir=str(REPO_ROOT / "outputs" / "bench_layouts"))
    rows = list(run.data.split.train)[: args.rows]
    k = int(cfg.algorithm.num_generations)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    layout = project_actors(cfg)
    sampler = JointRolloutSampler(layout, run.reward_config, parallel=layout.parallel)
    generation, update, tokens = [], [], []
    for buffer in range(1 + args.buffers):
        synchronize()
        started = time.perf_counter()
        rollouts = sampler.rollouts(rows, k)
        synchronize()
        sampled = time.perf_counter()
        distinct = tuple(group_advantages([float(j) for j in range(k)]))  # every candidate enters the loss
        samples = [
            [BufferSample(r.agents[p].prompt_ids, r.agents[p].candidates, distinct, 0.0, r.env_step) for r in rollouts]
            for p in range(len(layout.actors))
        ]
        layout.update_each(lambda actor: value_loss_step(actor, samples[actor.agent_id]))
        synchronize()
        done = time.perf_counter()
        env_steps = len(rows) * k
        if buffer:  # the first buffer warms up
            generation.append((sampled - started) / env_steps)
            update.append((done - sampled) / env_steps)
            tokens.append(statistics.fmean(sum(len(a.candidates[j].token_ids) for a in r.agents) for r in rollouts for j in range(k)))
    result = {
        "layout": name,
        "policies": len(layout.actors),
        "prompt_tokens": statistics.fmean(sum(len(a.prompt_ids) for a in r.agents) for r in rollouts),
        "generated_tokens_per_joint_action": statistics.fmean(tokens),
        "generation_s_per_env_step": statistics.fmean(generation),
        "update_s_per_env_step": statistics.fmean(update),
        "peak_gpu_gib": torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else float("nan"),
    }
    sampler.close()
    layout.close()
    del sampler, layout, rollouts
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4, help="train rows per buffer")
    parser.add_argument("--buffers", type=int, default=1, help="measured buffers after the warm-up one")
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    add_project_arguments(parser)
    args = parser.parse_args(argv)
    results = [measure_layout(name, args) for name in LAYOUTS]
    base = results[0]
    print(f"{'layout':<14}{'policies':>9}{'prompt tok':>12}{'gen tok':>9}{'gen s/step':>12}{'upd s/step':>12}{'peak GiB':>10}")
    for r in results:
        print(
            f"{r['layout']:<14}{r['policies']:>9}{r['prompt_tokens']:>12.0f}{r['generated_tokens_per_joint_action']:>9.0f}"
            f"{r['generation_s_per_env_step']:>12.3f}{r['update_s_per_env_step']:>12.3f}{r['peak_gpu_gib']:>10.2f}"
        )
    cen = results[1]
    print(
        "centralized / decentralized: generation "
        f"{cen['generation_s_per_env_step'] / base['generation_s_per_env_step']:.2f}x, update "
        f"{cen['update_s_per_env_step'] / base['update_s_per_env_step']:.2f}x, peak memory "
        f"{cen['peak_gpu_gib'] / base['peak_gpu_gib']:.2f}x"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
