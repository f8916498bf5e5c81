"""A decode step's weight matmuls alone: cuBLAS (`F.linear`) against the skinny Triton kernel of
travel/generation/decode_linear.py, per projection of a model's shape and per step.

Each projection has `--layers` weight matrices of its own (so no layer reads another's from the L2 cache); all
layers' products of one projection run as one captured CUDA graph, timed over `--repeat` replays. The floor is
the matrices' bytes at `--bandwidth` GB/s. With `--sweep` every tile configuration of a grid is timed too and
the best one is printed per shape, which is how `skinny_config`'s rule was chosen. The step tables add the
projections of a layer up: separate q/k/v and gate/up matrices (`decode_weights=copy`) and fused ones
(`decode_weights=fused`).

    python bench/decode_linear.py --rows 1,20
    python bench/decode_linear.py --rows 1,20 --sweep
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import torch.nn.functional as F

from bench.measure import time_step
from travel.generation.decode_linear import SkinnyConfig, skinny_config, skinny_matmul, skinny_runs

SEPARATE = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
FUSED = ("qkv", "o_proj", "gate_up", "down_proj")
SWEEP = {"block_n": (16, 32, 64, 128), "block_k": (128, 256, 512), "splits": (1, 2, 4, 8), "warps": (4, 8), "stages": (3, 4)}


def shapes(args: argparse.Namespace) -> dict[str, tuple[int, int]]:
    """(out, in) of every projection of a decoder layer, the fused ones included."""
    q, kv = args.heads * args.head_dim, args.kv_heads * args.head_dim
    return {
        "q_proj": (q, args.hidden), "k_proj": (kv, args.hidden), "v_proj": (kv, args.hidden), "qkv": (q + 2 * kv, args.hidden),
        "o_proj": (args.hidden, q), "gate_proj": (args.intermediate, args.hidden), "up_proj": (args.intermediate, args.hidden),
        "gate_up": (2 * args.intermediate, args.hidden), "down_proj": (args.hidden, args.intermediate),
    }


def sweep_configs() -> list[SkinnyConfig]:
    return [SkinnyConfig(*values) for values in itertools.product(*SWEEP.values())]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--rows", default="1,20", help="comma-separated rows per product (candidates)")
    parser.add_argument("--hidden", type=int, default=2560)
    parser.add_argument("--intermediate", type=int, default=9728)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--layers", type=int, default=36)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--bandwidth", type=float, default=4300.0, help="GB/s the floor assumes (4,300 measured on an H200)")
    parser.add_argument("--sweep", action="store_true", help="time every tile configuration of the grid too")
    args = parser.parse_args(argv)
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    processors = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 132
    generator = torch.Generator(device=device).manual_seed(0)
    print(f"{args.layers} layers of hidden {args.hidden}, intermediate {args.intermediate}, {args.heads}/{args.kv_heads} heads x {args.head_dim}, {dtype} on {device}")
    totals: dict[tuple[int, str, str], float] = {}
    for rows in [int(value) for value in args.rows.split(",")]:
        print(f"\n{rows} row(s): ms per step over {args.layers} layers")
        print("| projection | MB | floor ms | cuBLAS ms | skinny ms (rule) | rule | best skinny ms | best config | max abs error |")
        print("| --- | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: |")
        measured: dict[tuple[int, int], tuple[float, float]] = {}
        for name, (out_features, in_features) in shapes(args).items():
            if (out_features, in_features) in measured:  # k and v, gate and up: the same product
                totals[(rows, name, "cuBLAS")], totals[(rows, name, "skinny")] = measured[(out_features, in_features)]
                continue
            weights = [torch.randn(out_features, in_features, generator=generator, device=device).to(dtype) / in_features**0.5 for _ in range(args.layers)]
            x = torch.randn(rows, in_features, generator=generator, device=device).to(dtype)
            if not skinny_runs(x, weights[0]):
                raise SystemExit(f"the skinny kernel does not run on {device} in {dtype} (a GPU and half precision, or TRITON_INTERPRET=1)")
            expected = F.linear(x.double(), weights[0].double())
            megabytes = out_features * in_features * x.element_size() / 1e6
            floor = args.layers * megabytes / args.bandwidth
            cublas = time_step(device, lambda: [F.linear(x, weight) for weight in weights], args.repeat)
            rule = skinny_config(rows, out_features, in_features, processors)
            timed = {rule: time_step(device, lambda: [skinny_matmul(x, weight, rule) for weight in weights], args.repeat)}
            deviation = (skinny_matmul(x, weights[0], rule).double() - expected).abs().max().item()
            for config in sweep_configs() if args.sweep else []:
                if config not in timed:
                    try:
                        timed[config] = time_step(device, lambda: [skinny_matmul(x, weight, config) for weight in weights], args.repeat)
                    except Exception as error:  # noqa: BLE001 - triton's OutOfResources: tiles needing more shared memory than there is
                        if type(error).__name__ != "OutOfResources":
                            raise
            best = min(timed, key=timed.get)
            totals[(rows, name, "cuBLAS")], totals[(rows, name, "skinny")] = measured[(out_features, in_features)] = cublas, timed[rule]
            print(
                f"| {name} ({out_features}x{in_features}) | {megabytes:.1f} | {floor:.3f} | {cublas:.3f} | {timed[rule]:.3f} | "
                f"{describe(rule)} | {timed[best]:.3f} | {describe(best)} | {deviation:.1e} |",
                flush=True,
            )
            del weights
        print(f"\n{rows} row(s): a layer's projections per step")
        print("| weights | cuBLAS ms | skinny ms | floor ms |")
        print("| --- | ---: | ---: | ---: |")
        for label, names in (("separate (copy)", SEPARATE), ("fused", FUSED)):
            megabytes = sum(out * inner for out, inner in (shapes(args)[name] for name in names)) * 2 / 1e6
            print(
                f"| {label} | {sum(totals[(rows, name, 'cuBLAS')] for name in names):.3f} | "
                f"{sum(totals[(rows, name, 'skinny')] for name in names):.3f} | {args.layers * megabytes / args.bandwidth:.3f} |"
            )
    return 0


def describe(config: SkinnyConfig) -> str:
    return f"n{config.block_n} k{config.block_k} s{config.splits} w{config.warps} st{config.stages}"


if __name__ == "__main__":
    raise SystemExit(main())
