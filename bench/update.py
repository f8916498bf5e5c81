"""One MAGRPO update of one actor on real prompts: each prompt's K candidates packed behind one copy of the
prompt against one padded sequence per candidate (the reference's layout, the baseline). Packed two ways: the
prompt and the candidates as one sequence under one (prompt + candidates)^2 mask, and the default, the prompt
alone and then the candidates over its key/value cache (travel.algorithms.core.losses.shared_prompt_value_logprobs).
The one-mask form runs three times: with the prompt's rows as causal attention over the prompt (its default,
travel/algorithms/core/packed_attention.py), with the whole square under the mask, as it ran before, and split with
the decoder layers through torch.compile (hardware.compile_update; its first, warm-up update compiles, once
more at its second prompt's new length). With activation checkpointing on (`hardware=1xb200`) the cache is
dropped, so the default method runs the one-mask form.

The candidates are sampled by the actor itself for real train rows, so prompt and completion lengths are
the ones training sees. Every method runs the same `value_loss_step` (with its AdamW step) in the same
process, with the learning rate set to 0 so that every update sees the same weights: the loss values
are printed to show the layouts agree.

    python bench/update.py                                      # random_qwen3_4b, 2 prompts x K=4, agent 1
    python bench/update.py --prompts 10 --agent 0               # a whole default rollout buffer
    python bench/update.py --methods 2 --profile                # the one-mask split alone, and where its time goes
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import torch
from bench.measure import above_weights, gib, measure, profile_call
from bench.project import add_project_arguments, compose_config, project_actors
from travel.agents.compiled_layers import compile_update_layers, eager_update_layers, update_layers_compiled
from travel.algorithms.core import losses
from travel.algorithms.online.magrpo import BufferSample, group_advantages, value_loss_step
from travel.run import Run

# (name, packed, over the prompt's cache, the one-mask form's prompt rows split off, decoder layers compiled)
METHODS = (
    ("one sequence per candidate (baseline)", False, False, True, False),
    ("prompt packed once, one mask over the whole square", True, False, False, False),
    ("prompt packed once, one mask, prompt rows causal over the prompt", True, False, True, False),
    ("prompt packed once, candidates over its cache (default)", True, True, True, False),
    ("the one-mask split, decoder layers compiled (hardware.compile_update)", True, False, True, True),
)


@contextlib.contextmanager
def compiled_layers(model, used: bool):
    """The update with its decoder layers through torch.compile, or eager (whatever the config says)."""
    was = update_layers_compiled(model)
    (compile_update_layers if used else eager_update_layers)(model)
    try:
        yield
    finally:
        (compile_update_layers if was else eager_update_layers)(model)


@contextlib.contextmanager
def prompt_cache(used: bool):
    """The packed update with or without the prompt's cache (the one-mask layout is what activation
    checkpointing falls back to)."""
    usable = losses.prompt_cache_usable
    losses.prompt_cache_usable = usable if used else (lambda model: False)
    try:
        yield
    finally:
        losses.prompt_cache_usable = usable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=2, help="train rows in the buffer")
    parser.add_argument("--agent", type=int, default=1, choices=(0, 1))
    parser.add_argument("--repeats", type=int, default=2, help="updates per method (the first one warms up)")
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    parser.add_argument(
        "--methods", default=None, help="comma-separated indices into the methods (0 = baseline ... 4), default all"
    )
    parser.add_argument("--profile", action="store_true", help="profile one more update of the last method run")
    add_project_arguments(parser)
    args = parser.parse_args(argv)

    cfg = compose_config(["algorithm=magrpo", *args.overrides], args.device)
    run = Run(cfg, run_dir=str(REPO_ROOT / "outputs" / "bench_update"))
    rows = list(run.data.split.train)[: args.prompts]
    num_generations = int(cfg.algorithm.num_generations)
    actors = project_actors(cfg)
    actor = actors[args.agent]
    for group in actor.optimizer.param_groups:
        group["lr"] = 0.0  # AdamW still runs its step, but the weights (and so the losses) stay comparable
    weights = torch.cuda.memory_allocated(actor.device) if actor.device.type == "cuda" else None
    samples = []
    for row, group in zip(rows, actor.sample_rows(rows, num_generations)):
        rewards = [float(k) for k in range(len(group))]  # distinct rewards: every candidate enters the loss
        samples.append(BufferSample(actor.prompt_ids(row), tuple(group), tuple(group_advantages(rewards)), 0.0, 0))
    prompt_tokens = [len(sample.prompt_ids) for sample in samples]
    completion_tokens = [len(c.token_ids) for sample in samples for c in sample.candidates]
    print(
        f"model {cfg.model.name} on {actor.device}, agent {args.agent}; {len(samples)} prompts x {num_generations} "
        f"candidates; prompt tokens {prompt_tokens}; completion tokens {min(completion_tokens)}-{max(completion_tokens)}",
        flush=True,
    )
    chosen = METHODS if args.methods is None else [METHODS[int(index)] for index in args.methods.split(",")]
    results = []
    for name, packed, cached, split, compiled in chosen:
        for repeat in range(args.repeats):
            with prompt_cache(cached), compiled_layers(actor.model, compiled):
                step = lambda: value_loss_step(actor, samples, packed=packed, split_prompt=split)  # noqa: E731
                seconds, peak, update = measure(actor.device, step)
                loss = update.loss
            results.append({"method": name, "packed": packed, "repeat": repeat, "seconds": seconds, "peak_bytes": peak, "loss": loss})
            print(json.dumps(results[-1]), flush=True)
    if args.profile:
        with prompt_cache(cached), compiled_layers(actor.model, compiled):
            wall, kernels = profile_call(actor.device, step)
        print(f"profiled update ({name}): {wall:.2f} s, {kernels:.2f} s of GPU kernels ({kernels / wall:.0%} busy)")
    actors.close()

    last = {name: [r for r in results if r["method"] == name][-1] for name, *_ in chosen}
    baseline = last[chosen[0][0]]
    print("\n| method | seconds | peak GiB | peak - weights GiB | loss | vs first |\n| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, result in last.items():
        print(
            f"| {name} | {result['seconds']:.2f} | {gib(result['peak_bytes'])} | {above_weights(result['peak_bytes'], weights)} | "
            f"{result['loss']:.5f} | {baseline['seconds'] / result['seconds']:.2f}x |"
        )
    if args.json:
        summary = {"model": str(cfg.model.name), "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "results": results}
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
