"""One greedy evaluation of the anchor panel, timed per eval row, under several decoding settings in one process.

Each setting builds both actors as a run of the config does, warms up on the first eval row, then times
`Evaluator.periodic` over the whole panel. A setting is `name=override,override,...` (Hydra overrides of
the composed config), plus `share_prompt_cache=never` for the repeated-prompt step. The defaults compare
the single-row fp32 path (the last release's defaults for a small model) with bf16 compute, the
shared-prefix step and four rows per call:

    python bench/evaluation.py experiment=smollm2_gpu_learning model.path=/dir data.path=/path/train.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.project import compose_config, project_actors  # noqa: E402

DEFAULT_SETTINGS = (
    "fp32 one row per call, prompt repeated=hardware.compute_dtype=null,generation.eval_rows_per_call=1,share_prompt_cache=never",
    "bf16 compute, prompt shared, 4 rows per call=hardware.compute_dtype=bfloat16,generation.eval_rows_per_call=4",
    "the same over a bf16 weight copy=hardware.compute_dtype=bfloat16,generation.eval_rows_per_call=4,"
    "hardware.decode_weights=copy",
)


def timed_evaluation(overrides: list[str], setting: str) -> dict:
    import torch

    from travel.algorithms.core.evaluation import Evaluator
    from travel.algorithms.core.rollout import JointRolloutSampler
    from travel.run import Run

    name, _, options = setting.partition("=")
    extra = [option for option in options.split(",") if option]
    share = "never" if "share_prompt_cache=never" in extra else "auto"
    cfg = compose_config([*overrides, *(option for option in extra if not option.startswith("share_prompt_cache="))])
    split = Run(cfg, run_dir="/tmp/bench_evaluation").data.split
    actors = project_actors(cfg)
    for actor in actors:
        actor.decoder.share_prompt_cache = share
    sampler = JointRolloutSampler(actors.actors)
    rows_per_call = int(cfg.generation.eval_rows_per_call)
    warmup = Evaluator(sampler, anchor_rows=split.anchor[:1], eval_rows=split.anchor[:1], panel_size=1, progress=False)
    warmup.periodic(0)
    evaluator = Evaluator(
        sampler, anchor_rows=split.anchor, eval_rows=split.anchor, panel_size=len(split.anchor), progress=False,
        rows_per_call=rows_per_call,
    )
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    started = time.perf_counter()
    point = evaluator.periodic(0)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    actors.close()
    return {
        "setting": name,
        "rows": len(split.anchor),
        "seconds": seconds,
        "seconds_per_row": seconds / len(split.anchor),
        "eval_reward": point.public["eval/reward"],
        "texts": [sample["texts"] for sample in point.samples],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setting", action="append", help="name=override,override,... (repeatable)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    results = [timed_evaluation(args.overrides, setting) for setting in (args.setting or DEFAULT_SETTINGS)]
    baseline = results[0]["seconds_per_row"]
    print("\n| setting | rows | seconds | s / eval row | vs first | eval/reward |\n| --- | ---: | ---: | ---: | ---: | ---: |")
    for result in results:
        print(
            f"| {result['setting']} | {result['rows']} | {result['seconds']:.2f} | {result['seconds_per_row']:.2f} "
            f"| {baseline / result['seconds_per_row']:.2f}x | {result['eval_reward']:.4f} |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
