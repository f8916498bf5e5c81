"""The structured decoder's own work per step, without the model: state machine, grammar masks and sampling.

`decode_loop` (travel/generation/decode_loop.py) runs with a stand-in forward that returns fixed random logits
over the 4B model's 151,936-token vocabulary, so every iteration does exactly the decoder's per-step work for
`--rows` rows: close checks, the legal-token mask, temperature and top-p over the vocabulary, the draw
(per-row seeds, a torch.Generator or greedy), the log-prob and the state update. It runs in benchmark mode
(`fill_budget`: all `--steps` iterations) for a real role plan. This is the part of a decode step that runs
outside the model's CUDA graph; `--compile-loop` times it compiled (`hardware.compile_decode`'s loop) beside it,
and the script exits 1 where the compiled loop decoded other tokens than the eager one.

    python bench/decode_loop.py                                   # cuda, 20 rows, 256 steps, seeds
    python bench/decode_loop.py --rows 40 --draw generator --profile
    python bench/decode_loop.py --device cpu --rows 4 --days 1 --compile-loop
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import SimpleNamespace

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import torch

from bench.measure import profile_call, synchronize
from travel.agents.offline_tokenizer import build_offline_tokenizer
from travel.generation.decode_loop import decode_loop
from travel.generation.skeleton import build_slot_plan
from travel.generation.value_trie import TrieCache

VOCAB = 151_936  # Qwen3-4B's output vocabulary
DRAWS = ("seeds", "generator", "greedy")


def loop_settings(tokenizer, steps: int, compile_loop: bool) -> SimpleNamespace:
    """What `decode_loop` reads from its decoder, in benchmark mode (every row decodes all `steps`)."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return SimpleNamespace(
        tokenizer=tokenizer, max_new_tokens=steps, max_value_tokens=32, temperature=0.7, top_p=0.8,
        fill_budget=True, pad_token_id=int(pad), _tries=TrieCache(tokenizer), compile_decode=compile_loop,
    )


class FixedLogits:
    """A stand-in forward: cycles through a few fixed (rows, vocab) logit tensors."""

    def __init__(self, rows: int, device: torch.device, seed: int, count: int = 4):
        generator = torch.Generator(device="cpu").manual_seed(seed)
        self.pool = [(3 * torch.randn(rows, VOCAB, generator=generator)).to(device) for _ in range(count)]

    def __call__(self, token: torch.Tensor, step: int) -> torch.Tensor:
        return self.pool[step % len(self.pool)]


def run_loop(settings, plans, rows: int, draw: str, device: torch.device, seed: int) -> tuple[int, torch.Tensor]:
    """(iterations, the decoded tokens) of one decode call over the fixed logits."""
    per_plan = rows // len(plans)
    forward = FixedLogits(rows, device, seed)
    generator = torch.Generator(device=device).manual_seed(seed) if draw == "generator" else None
    row_seeds = torch.arange(rows, device=device) + seed if draw == "seeds" else None
    tokens, *_, steps = decode_loop(
        settings, plans, forward.pool[-1], per_plan, draw == "greedy", True, generator, row_seeds, device, forward,
        compiled=settings.compile_decode,
    )
    return steps + 1, tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--steps", type=int, default=256)
    parser.add_argument("--draw", choices=DRAWS, default="seeds")
    parser.add_argument("--agent", type=int, choices=(0, 1), default=1)
    parser.add_argument("--days", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile-loop", action="store_true", help="also time the compiled loop")
    parser.add_argument("--profile", action="store_true", help="profile one more run of the last variant")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    tokenizer = build_offline_tokenizer()
    plans = [build_slot_plan(tokenizer, args.agent, args.days)]
    minimum = plans[0].minimum_tokens
    if minimum > args.steps:
        raise SystemExit(f"--steps {args.steps} cannot hold agent {args.agent}'s {args.days}-day action ({minimum} tokens)")
    print(f"decode loop on {device}: {args.rows} rows, {args.steps} steps, draw={args.draw}, vocabulary {VOCAB}")
    lines = ["| loop | ms / step | first call s | tokens as the eager loop |", "| --- | ---: | ---: | --- |"]
    timings, decoded = {}, {}
    variants = [False, True] if args.compile_loop else [False]
    for compiled in variants:
        settings = loop_settings(tokenizer, args.steps, compiled)
        started = time.perf_counter()
        run_loop(settings, plans, args.rows, args.draw, device, args.seed)  # warm-up (and compile)
        synchronize(device)
        first = time.perf_counter() - started
        synchronize(device)
        started = time.perf_counter()
        steps, decoded[compiled] = run_loop(settings, plans, args.rows, args.draw, device, args.seed)
        synchronize(device)
        timings[compiled] = 1000 * (time.perf_counter() - started) / steps
        name = "compiled" if compiled else "eager"
        same = "yes" if torch.equal(decoded[compiled], decoded[False]) else "NO"
        lines.append(f"| {name} | {timings[compiled]:.3f} | {first:.1f} | {same} |")
        print(lines[-1], flush=True)
    if len(timings) == 2:
        lines.append(f"| eager / compiled | {timings[False] / timings[True]:.2f}x | | |")
    print("\n".join(lines))
    if args.profile:
        run = lambda: run_loop(settings, plans, args.rows, args.draw, device, args.seed)  # noqa: E731
        wall, kernels = profile_call(device, run, args.steps)
        print(f"profiled: {1000 * wall / args.steps:.3f} ms per step wall, {1000 * kernels / args.steps:.3f} ms of kernels")
    return 0 if all(torch.equal(tokens, decoded[False]) for tokens in decoded.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
