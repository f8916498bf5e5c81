"""A decode step's weight matmuls alone: how near each projection's matmul reads its matrix at the GPU's bandwidth.

A decode step multiplies a few rows (candidates x new positions) by every weight matrix of the model, so a matmul
costs about the time to read its matrix, and no step can run faster than all matrices read once. Here each
layer has matrices of its own (so no layer reads another's from the L2 cache), in the layout of
`hardware.decode_weights=fused` (q/k/v as one matrix, gate/up as one; shapes from `--hidden` and the rest, Qwen3-4B's
by default). All layers' matmuls of one projection run as one captured CUDA graph, and so does a whole step's (every
layer's four and the output head, in order), timed over `--repeat` replays. The floor is the bytes read at
`--bandwidth` GB/s. `--autotune` times TorchInductor's max-autotune choice of kernel (cuBLAS or its Triton
templates) as well, and `--split-k` the split-K kernel of `hardware.decode_matmul=split_k`
(travel/generation/kernels/skinny_matmul.py).

    python bench/matmul_floor.py --rows 1,20 --split-k
    python bench/matmul_floor.py --rows 20 --autotune
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import torch.nn.functional as F

from bench.measure import time_step
from travel.generation.kernels.skinny_matmul import SplitPlan, skinny_linear, split_k_counts


def projections(args: argparse.Namespace) -> dict[str, tuple[int, int]]:
    """(inputs, outputs) of each layer's matmul in the fused layout."""
    return {
        "q/k/v": (args.hidden, (args.query_heads + 2 * args.kv_heads) * args.head_dim),
        "o": (args.query_heads * args.head_dim, args.hidden),
        "gate/up": (args.hidden, 2 * args.intermediate),
        "down": (args.intermediate, args.hidden),
    }


def linear(rows: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.linear(rows, weight)


def autotuned() -> object:
    """`linear` through torch.compile with max-autotune GEMMs and no CUDA graphs of its own (a step captures its own)."""
    return torch.compile(linear, dynamic=False, options={"max_autotune": True, "triton.cudagraphs": False})


def split_k(device: torch.device) -> object:
    """The split-K kernel, each matrix with the plan of its shape on `device` and counters of its own."""
    processors = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 8
    plans: dict[int, tuple[SplitPlan, torch.Tensor | None]] = {}

    def product(rows: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if id(weight) not in plans:
            plan = SplitPlan.of(weight.shape[0], weight.shape[1], processors)
            plans[id(weight)] = plan, split_k_counts(plan, weight.shape[0], weight.device)
        return skinny_linear(rows, weight, None, *plans[id(weight)])

    return product


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--rows", default="1,20", help="rows per matmul, comma-separated for a table each")
    parser.add_argument("--layers", type=int, default=36)
    parser.add_argument("--hidden", type=int, default=2560)
    parser.add_argument("--intermediate", type=int, default=9728)
    parser.add_argument("--query-heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=151936, help="the output head's rows (0: no head)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--bandwidth", type=float, default=4300.0, help="GB/s the floor assumes (4,300 measured on an H200)")
    parser.add_argument("--autotune", action="store_true", help="also TorchInductor's max-autotune kernels")
    parser.add_argument("--split-k", action="store_true", help="also the split-K kernel (hardware.decode_matmul=split_k)")
    args = parser.parse_args(argv)
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    generator = torch.Generator(device=device).manual_seed(0)

    def normal(*size: int) -> torch.Tensor:
        return (torch.randn(*size, generator=generator, device=device) * 0.02).to(dtype)

    shapes = projections(args)
    weights = {name: [normal(outputs, inputs) for _ in range(args.layers)] for name, (inputs, outputs) in shapes.items()}
    head = normal(args.vocab, args.hidden) if args.vocab else None
    element = torch.finfo(dtype).bits // 8
    step_bytes = sum(inputs * outputs for inputs, outputs in shapes.values()) * args.layers * element
    step_bytes += head.numel() * element if head is not None else 0
    methods = {"F.linear": linear}  # cuBLAS on a GPU
    if args.autotune:
        methods["max-autotune"] = autotuned()
    if args.split_k:
        methods["split-K"] = split_k(device)
    print(f"{args.layers} layers, hidden {args.hidden}, intermediate {args.intermediate}, {args.query_heads}/{args.kv_heads} "
          f"heads x {args.head_dim}, vocab {args.vocab}, {dtype} on {device}; a step reads {step_bytes / 1e6:,.1f} MB of weights, "
          f"floor {step_bytes / (args.bandwidth * 1e9) * 1e3:.3f} ms at {args.bandwidth:,.0f} GB/s")
    for rows in [int(count) for count in args.rows.split(",") if count.strip()]:
        inputs_of = {name: normal(rows, inputs) for name, (inputs, _) in shapes.items()}
        head_input = normal(rows, args.hidden)
        print(f"\n{rows} rows")
        print("| method | matmul | MB | us per call | GB/s | x floor | first call s |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for label, matmul in methods.items():
            started = time.perf_counter()
            for name in shapes:
                matmul(inputs_of[name], weights[name][0])  # compiles where the method compiles
            if head is not None:
                matmul(head_input, head)
            first = time.perf_counter() - started
            timed = {name: (weights[name][0].numel() * element, time_step(
                device, lambda name=name: [matmul(inputs_of[name], weight) for weight in weights[name]], args.repeat
            ) / args.layers) for name in shapes}
            if head is not None:
                timed["output head"] = (head.numel() * element, time_step(device, lambda: matmul(head_input, head), args.repeat))

            def step() -> None:
                for layer in range(args.layers):
                    for name in shapes:
                        matmul(inputs_of[name], weights[name][layer])
                if head is not None:
                    matmul(head_input, head)

            timed["step"] = (step_bytes, time_step(device, step, args.repeat))
            for name, (size, ms) in timed.items():
                rate = size / (ms * 1e-3) / 1e9
                print(f"| {label} | {name} | {size / 1e6:,.2f} | {ms * 1e3:,.1f} | {rate:,.1f} | {args.bandwidth / rate:.2f} | {first:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
