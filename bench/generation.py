"""Structured decoding against plain `model.generate`: K candidates of N new tokens for one long role prompt.

All runs sample the same prompt in the same process (temperature 0.7, top-p 0.8, no top-k):

- baseline: `model.generate(num_return_sequences=K, min_new_tokens=N, max_new_tokens=N)`, which copies
  the prompt K times and prefills every copy, then decodes with transformers' DynamicCache; once as
  shipped and once with the cuDNN SDPA backend disabled like the decoder does (`--baseline`), so the
  table separates that backend choice from the decoder's own savings; with `--actions` it runs at most N
  tokens and each row stops once the prefill plus its text parses as a JSON object (a complete action);
- StructuredDecoder (travel/generation): one prefill, the cache expanded to K rows with room for N
  tokens, the JSON grammar masks, value masks and forced schema tokens.

A real action ends as soon as its JSON object is complete, so for an equal amount of work the decoder
runs in its benchmark mode `fill_budget=True`: values never close voluntarily and have no token cap,
only the budget rule closes them, and the loop runs all N steps (rows that completed early keep
decoding padding). Every step therefore does the full per-step work (forward of K rows, grammar masks,
top-p, state update) for exactly N steps, like the baseline.

The prompt is a role prompt of a real train row (or a synthetic row without the shared data), padded
with more of its own reference context, or cut in the middle, to about --prompt-tokens tokens.
Printed: seconds, ms per decode step, generated tokens per second, peak GPU memory, and the ratios. The ms per
step divide the whole call, prefill included, by the steps, as for `model.generate`; the decoder's note adds its
prefill's seconds and its decode steps' alone (`StructuredDecoder.last_phases`: the steps, their set-up and the
first step's CUDA-graph capture, without the prefill).
`--draw` picks the sampling randomness: `seeds` (counter-based per candidate, the default), `generator` (one
torch.Generator, as the trainers' actors draw) or `streams` (the candidates split into two generators' streams, as a
preference collection's shared target and comparator call draws).
With `--profile`, one more run of the last step backend goes through torch.profiler: its GPU kernel
time per step against its wall time per step says whether decoding waits on the GPU (busy near 100%)
or on the Python loop that feeds it, and the top operators say where the time goes.

    python bench/generation.py                               # random_qwen3_4b on cuda, 6000 / 1024 / 20
    python bench/generation.py --model tiny_random --device cpu --prompt-tokens 200 --new-tokens 64 --candidates 4
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import torch

from bench.measure import above_weights, gib, measure, profile_call
from bench.step_backends import StepBackend
from travel.agents import models
from travel.generation import DecodeRequest, StructuredDecoder, render_chat_prompt
from travel.generation.compiled_forward import COMPILED_FORWARD, COMPILED_PROMPT_FORWARD, COMPILED_SELECTED_FORWARD
from travel.generation.decode_loop import COMPILED_ADVANCE, COMPILED_SELECT
from travel.generation.model_io import decode_attention
from travel.task.actions import parse_assignments
from travel.task.prompts import build_role_prompt
from travel.task.roles import role_capacity

DRAWS = ("seeds", "generator", "streams")

COMPILED_FUNCTIONS = (
    COMPILED_FORWARD, COMPILED_SELECTED_FORWARD, COMPILED_PROMPT_FORWARD, COMPILED_SELECT, COMPILED_ADVANCE
)
DEFAULT_DATA = REPO_ROOT / ".." / "shared" / "data" / "travelplanner" / "train.jsonl"
FACTORIES: dict[str, Callable[..., models.LoadedModel]] = {
    "random_qwen3_4b": models.build_random_qwen3_4b,
    "tiny_random": models.build_tiny_random,
    "qwen3_4b_instruct": models.load_qwen3_4b_instruct,
    "smollm2_135m": models.load_smollm2_135m,
}


@dataclass
class Measurement:
    name: str
    seconds: float
    new_tokens: int  # per candidate
    candidates: int
    peak_bytes: int | None
    note: str = ""
    phases: dict[str, float] | None = None  # the decoder's seconds by phase (weights, prefill, decode)

    @property
    def ms_per_step(self) -> float:
        return 1000.0 * self.seconds / self.new_tokens

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens * self.candidates / self.seconds


def pick_row_and_agent(
    tokenizer: Any, data: Path, agents: tuple[int, ...], target_chars: int, new_tokens: int
) -> tuple[Any, int]:
    """A real train row (a synthetic one without the data) and role whose prompt is closest to `target_chars`
    among those whose all-'-' action fits in `new_tokens` (first listed agent preferred)."""
    from travel.generation.skeleton import build_slot_plan

    if data.is_file():
        from travel.data import load_rows

        rows = load_rows(str(data))
    else:
        from travel.data.normalise import normalise_row
        from travel.data.synthetic import SyntheticSource

        rows = [normalise_row(raw, index) for index, raw in enumerate(SyntheticSource(seed=0, num_rows=20).load_raw())]
    for agent in agents:
        fitting = [row for row in rows if build_slot_plan(tokenizer, agent, row.days).minimum_tokens <= new_tokens]
        if fitting:
            return min(fitting, key=lambda row: abs(len(build_role_prompt(row, agent).user) - target_chars)), agent
    raise SystemExit(f"--new-tokens {new_tokens} cannot hold any role's all-'-' action on these rows")


def sized_prompt(tokenizer: Any, row: Any, agent_id: int, target_tokens: int) -> str:
    """The row's rendered role prompt (with prefill), padded or cut in the middle of the user text to ~target."""
    role = build_role_prompt(row, agent_id)

    def render(user: str) -> str:
        return render_chat_prompt(tokenizer, role.system, user, role.prefill)

    def count(user: str) -> int:
        return len(tokenizer.encode(render(user), add_special_tokens=False))

    user = role.user
    if count(user) < target_tokens:
        _, _, context = user.partition("REFERENCE-DERIVED PLANNING CONTEXT:")
        filler = context or user
        extra = ""
        while count(user + extra) < target_tokens:
            extra += "\n\nMORE REFERENCE CONTEXT (repeated for length):" + filler
        user = user + extra
    ids = tokenizer.encode(user, add_special_tokens=False)
    overhead = count("")
    keep = max(target_tokens - overhead, 16)
    if len(ids) > keep:
        half = keep // 2
        user = tokenizer.decode(ids[:half]) + tokenizer.decode(ids[-(keep - half) :])
    return render(user)


class JsonActionStop:
    """`model.generate` stopping criterion: a row is done once the assistant prefill plus its generated text
    parses as one JSON object, i.e. the action is complete (what a real action decode waits for)."""

    def __init__(self, tokenizer: Any, prompt_tokens: int, prefill: str):
        self.tokenizer, self.prompt_tokens, self.prefill = tokenizer, prompt_tokens, prefill
        self._decoder = json.JSONDecoder()

    def _complete(self, generated: list[int]) -> bool:
        try:
            self._decoder.raw_decode(self.prefill + self.tokenizer.decode(generated, skip_special_tokens=True))
        except ValueError:
            return False
        return True

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        rows = input_ids[:, self.prompt_tokens :].tolist()
        return torch.tensor([self._complete(row) for row in rows], dtype=torch.bool, device=input_ids.device)


def run_baseline(
    loaded: models.LoadedModel,
    prompt_ids: torch.Tensor,
    new_tokens: int,
    candidates: int,
    seed: int,
    json_stop: str | None = None,
):
    """`model.generate` for exactly `new_tokens` tokens, or with `json_stop` (the assistant prefill) at most
    `new_tokens`, each row stopping when its action's JSON object is complete."""
    torch.manual_seed(seed)
    length = {"min_new_tokens": new_tokens} if json_stop is None else {}
    if json_stop is not None:
        from transformers import StoppingCriteriaList

        length["stopping_criteria"] = StoppingCriteriaList(
            [JsonActionStop(loaded.tokenizer, prompt_ids.shape[1], json_stop)]
        )
    return loaded.model.generate(
        input_ids=prompt_ids,
        attention_mask=torch.ones_like(prompt_ids),
        do_sample=True,
        temperature=0.7,
        top_p=0.8,
        top_k=0,
        num_return_sequences=candidates,
        max_new_tokens=new_tokens,
        pad_token_id=loaded.tokenizer.pad_token_id,
        use_cache=True,
        **length,
    )


def format_table(results: list[Measurement], weights_bytes: int | None) -> str:
    lines = [
        "| method | seconds | ms / step | tokens / s | peak GiB | peak - weights GiB | note |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for m in results:
        lines.append(
            f"| {m.name} | {m.seconds:.2f} | {m.ms_per_step:.2f} | {m.tokens_per_second:.0f} | "
            f"{gib(m.peak_bytes)} | {above_weights(m.peak_bytes, weights_bytes)} | {m.note} |"
        )
    baselines = [m for m in results if not m.name.startswith("StructuredDecoder")]
    for ours in results[len(baselines) :]:
        for base in baselines:
            memory_ratio = (
                "n/a" if not (base.peak_bytes and ours.peak_bytes) else f"{ours.peak_bytes / base.peak_bytes:.2f}x"
            )
            lines.append(
                f"| {ours.name} / {base.name} | {ours.seconds / base.seconds:.2f}x "
                f"| {ours.ms_per_step / base.ms_per_step:.2f}x | {ours.tokens_per_second / base.tokens_per_second:.2f}x "
                f"| {memory_ratio} | | speed-up {base.seconds / ours.seconds:.2f}x |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(FACTORIES), default="random_qwen3_4b")
    parser.add_argument("--path", default=None, help="model.path for qwen3_4b_instruct / smollm2_135m")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default=None, help="default: the option's own (bf16 for 4B, fp32 otherwise)")
    parser.add_argument("--prompt-tokens", type=int, default=6000)
    parser.add_argument("--new-tokens", type=int, default=1024)
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--agent", type=int, choices=(0, 1), default=1, help="the other role if this one cannot fit")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (CPU runs)")
    parser.add_argument(
        "--baseline",
        choices=("both", "stock", "no-cudnn", "none"),
        default="both",
        help="model.generate as shipped, and/or under the decoder's SDPA backend choice (no cuDNN)",
    )
    parser.add_argument(
        "--step-backends",
        default="cuda_graph",
        help="comma-separated StructuredDecoder step backends to time (eager, static, cuda_graph); a static "
        "backend with ':repeated' keeps the prompt's keys once per candidate instead of once (e.g. "
        "cuda_graph:repeated), with ':shared' once even for a single candidate; a third part sets the compute dtype (cuda_graph:shared:bfloat16) and a fourth decodes over a weight copy in "
        "it (cuda_graph:shared:bfloat16:copy, hardware.decode_weights=copy) or a copy with fused projections "
        "(cuda_graph:shared::fused, hardware.decode_weights=fused); '+jump' feeds whole forced runs "
        "(generation.jump_forced, e.g. cuda_graph:shared+jump) and '+compile' runs the forward through torch.compile "
        "(hardware.compile_decode, e.g. cuda_graph:shared+jump+compile), '+prefill' each prompt's prefill too "
        "(hardware.compile_prefill), '+cublas' runs the fused layers' matmuls by cuBLAS "
        "(hardware.decode_matmul=cublas); '+flex' or '+joint_softmax' picks the "
        "shared prefix's attention kernel (travel/generation/prefix_attention.py; default auto) "
        "(bench/step_backends.py)",
    )
    parser.add_argument(
        "--actions",
        action="store_true",
        help="decode real role actions (values close when the policy closes them) instead of the full token budget, "
        "and the baseline until each action's JSON object closes (at most --new-tokens); 'ms / step' is then per "
        "decode step, and the note gives the steps and tokens per action",
    )
    parser.add_argument(
        "--draw", choices=DRAWS, default="seeds",
        help="sampling randomness: per-candidate seeds, one generator (the actors'), or two generators' streams "
        "splitting the candidates (a shared target and comparator call)",
    )
    parser.add_argument("--profile", action="store_true", help="profile one more run of the last step backend")
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    options: dict[str, Any] = {"device": str(device), "seed": args.seed}
    if args.dtype:
        options["dtype"] = args.dtype
    if args.path:
        options["path"] = args.path
    started = time.perf_counter()
    loaded = FACTORIES[args.model](**options)
    load_seconds = time.perf_counter() - started
    weights_bytes = torch.cuda.memory_allocated(device) if device.type == "cuda" else None
    tokenizer = loaded.tokenizer

    agents = (args.agent, 1 - args.agent)
    row, agent = pick_row_and_agent(tokenizer, args.data, agents, 3 * args.prompt_tokens, args.new_tokens)
    prompt = sized_prompt(tokenizer, row, agent, args.prompt_tokens)
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    request = DecodeRequest(prompt, agent, row.days, tuple(prompt_ids))
    print(
        f"model {args.model} on {device} ({loaded.model.dtype}, loaded in {load_seconds:.1f} s); "
        f"row {row.source_index} ({row.days} days), agent {agent}; prompt {len(prompt_ids)} tokens; "
        f"{args.candidates} candidates x {args.new_tokens} new tokens",
        flush=True,
    )

    warm = StructuredDecoder(loaded.model, tokenizer, max_new_tokens=args.new_tokens, max_value_tokens=2)
    warm.generate([request], 1, greedy=True)  # builds the value tables and warms the kernels
    ids_tensor = torch.tensor([prompt_ids], device=device)

    results: list[Measurement] = []
    baselines = {"stock": [False], "no-cudnn": [True], "both": [False, True], "none": []}[args.baseline]
    # with --actions the baseline decodes real actions too: after the same assistant prefill, until the JSON closes
    json_stop = build_role_prompt(row, agent).prefill if args.actions else None
    for without_cudnn in baselines:
        name = "generate, no cuDNN SDPA" if without_cudnn else "generate (stock)"
        name += ", JSON stop" if json_stop else ""
        attention = decode_attention(device) if without_cudnn else contextlib.nullcontext()
        with attention:
            run_baseline(loaded, ids_tensor, 8, 2, args.seed)  # warm-up
            try:
                seconds, peak, output = measure(
                    device,
                    lambda: run_baseline(loaded, ids_tensor, args.new_tokens, args.candidates, args.seed, json_stop),
                )
            except torch.cuda.OutOfMemoryError:
                print(f"{name}: out of GPU memory")
                continue
        generated = output.shape[1] - ids_tensor.shape[1]
        note = ""
        if json_stop:
            stop = JsonActionStop(tokenizer, ids_tensor.shape[1], json_stop)
            complete = sum(stop._complete(row) for row in output[:, ids_tensor.shape[1] :].tolist())
            note = f"{complete}/{args.candidates} JSON objects complete; {generated} decode steps"
        results.append(Measurement(name, seconds, generated, args.candidates, peak, note))
        del output  # released before the next run

    strict_all = True
    specs = [name.strip() for name in args.step_backends.split(",") if name.strip()]
    for spec in specs:
        step = StepBackend.parse(spec)
        decoder = StructuredDecoder(
            loaded.model,
            tokenizer,
            max_new_tokens=args.new_tokens,
            temperature=0.7,
            top_p=0.8,
            fill_budget=not args.actions,
            **step.decoder_settings(),
        )
        compile_note = ""
        if step.compiles:  # the first call compiles; the timed call is the second, like a run's later calls
            # as in a process of its own: a step of another layout compiled first would make this one's sizes and
            # strides dynamic (a slower compile, and slower kernels), which is not what a decode of one kind runs
            torch._dynamo.reset()
            compile_seconds, _, _ = measure(device, lambda: sample(decoder, request, args.candidates, args.draw, args.seed, device))
            compile_note = f"; first call (compiles) {compile_seconds:.1f} s"
        seconds, peak, groups = measure(device, lambda: sample(decoder, request, args.candidates, args.draw, args.seed, device))
        candidates = groups[0]
        lengths = [len(c.token_ids) for c in candidates]
        strict = sum(
            parse_assignments(c.text, agent, role_capacity(agent, row.days), row.days).parse_success for c in candidates
        )
        strict_all = strict_all and strict == len(candidates)
        note = f"{strict}/{len(candidates)} strict; generated {min(lengths)}-{max(lengths)} tokens{compile_note}"
        note += "" if args.draw == "seeds" else f"; {args.draw} draws"
        if step.compiles:
            failed = [compiled.purpose for compiled in COMPILED_FUNCTIONS if compiled.failed]
            note += f"; torch.compile FAILED for {', '.join(failed)}, which ran uncompiled" if failed else ""
        steps = args.new_tokens
        if args.actions:
            steps = decoder.last_decode_steps
            note += f"; {steps} decode steps, {sum(lengths) / len(lengths):.0f} tokens per action"
        phases = decoder.last_phases.seconds()
        note += (f"; prefill {phases['prefill']:.3f} s, the decode steps alone "
                 f"{1000 * phases['decode'] / decoder.last_decode_steps:.2f} ms each")
        results.append(Measurement(f"StructuredDecoder ({step.label()})", seconds, steps, args.candidates, peak, note, phases))

    print()
    print(format_table(results, weights_bytes))
    profiled = None
    if args.profile and specs:
        profiled = profile_decode(decoder, request, args.candidates, args.draw, args.seed, device, args.new_tokens)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "model": args.model,
                    "device": str(device),
                    "prompt_tokens": len(prompt_ids),
                    "new_tokens": args.new_tokens,
                    "candidates": args.candidates,
                    "draw": args.draw,
                    "weights_bytes": weights_bytes,
                    "profile": profiled,
                    "results": [
                        {
                            "name": m.name,
                            "seconds": m.seconds,
                            "ms_per_step": m.ms_per_step,
                            "tokens_per_second": m.tokens_per_second,
                            "peak_bytes": m.peak_bytes,
                            "note": m.note,
                            "phases": m.phases,
                        }
                        for m in results
                    ],
                },
                indent=2,
            )
        )
    return 0 if strict_all else 1


def sample(decoder: StructuredDecoder, request: DecodeRequest, candidates: int, draw: str, seed: int, device: torch.device):
    """One decoder call of `candidates` for `request`, its randomness as `draw` says (fresh generators each call)."""
    if draw == "seeds":
        return decoder.generate([request], candidates, seeds=[seed])
    if draw == "generator":
        return decoder.generate([request], candidates, generator=torch.Generator(device).manual_seed(seed))
    if candidates < 2:
        raise SystemExit("--draw streams splits the candidates into two streams: use --candidates 2 or more")
    halves = (candidates - candidates // 2, candidates // 2)
    streams = [(count, torch.Generator(device).manual_seed(seed + part)) for part, count in enumerate(halves)]
    return decoder.generate([request], candidates, streams=streams)


def profile_decode(
    decoder: StructuredDecoder, request: DecodeRequest, candidates: int, draw: str, seed: int, device: torch.device, steps: int
):
    """Per decode step: wall ms, GPU kernel ms and the GPU's busy share, for one profiled run; prints the top
    operators by their own time (GPU kernels on CUDA, CPU elsewhere) and the kernel time by kind."""
    wall, kernels = profile_call(device, lambda: sample(decoder, request, candidates, draw, seed, device), steps)
    wall_ms, kernel_ms = wall * 1000 / steps, kernels * 1000 / steps
    summary = {"wall_ms_per_step": wall_ms, "kernel_ms_per_step": kernel_ms, "gpu_busy": kernel_ms / wall_ms}
    print(
        f"profiled run ({candidates} candidates): {wall_ms:.2f} ms per step, {kernel_ms:.2f} ms of GPU kernels "
        f"per step ({summary['gpu_busy']:.0%} busy; the profiler itself adds host time)"
    )
    return summary

if __name__ == "__main__":
    raise SystemExit(main())
