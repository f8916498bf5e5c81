"""Shared-prefix decode attention alone: each kernel of travel/generation/prefix_attention.py per decode step.

One step of a model with `--layers` layers attends once per layer; each layer here has its own prefix and
suffix tensors (so no layer reads another's from the L2 cache), and all layers' calls of one kernel run as
one captured CUDA graph, timed over `--repeat` replays. The floor is the bytes a step must read (every
layer's prefix keys and values and the suffix's `--generated` written columns, once) at `--bandwidth` GB/s;
`chunked_flash` and `split_flash` read those columns alone, as the decoder runs them, the other kernels the whole
`--capacity`. Each kernel's output is compared with
a float64 evaluation of the same attention.

    python bench/prefix_attention.py --candidates 20
    python bench/prefix_attention.py --candidates 1
    python bench/prefix_attention.py --candidates 1 --kernels split_triton --chunks 16,32,48
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from bench.measure import time_step
from travel.generation.options import PREFIX_KERNELS
from travel.generation.prefix_attention import PACKED_KERNELS, attention_kernel
from travel.generation.prefix_merge import to_prompts, to_rows
from travel.generation.prefix_packing import WrittenSuffix, pack_prefix, prefix_chunks, prompt_tokens


def reference(per_row, prefix_keys, prefix_values, prefix_bias, key, value, suffix_mask, scale, repeats):
    """The attention in float64, prefix and suffix concatenated."""
    prompts = prefix_keys.shape[0]
    per_prompt = to_prompts(per_row.double(), prompts, repeats)
    prefix_scores = per_prompt @ prefix_keys.double().transpose(-1, -2) * scale + prefix_bias.double()
    suffix_scores = to_prompts(per_row.double() @ key.double().transpose(-1, -2) * scale + suffix_mask.double(), prompts, repeats)
    weights = torch.softmax(torch.cat([prefix_scores, suffix_scores], dim=-1), dim=-1)
    width = prefix_keys.shape[2]
    return to_rows(weights[..., :width] @ prefix_values.double(), prompts, repeats) + to_rows(weights[..., width:], prompts, repeats) @ value.double()


def layer_inputs(args: argparse.Namespace, device: torch.device, dtype: torch.dtype, generator: torch.Generator):
    rows = args.prompts * args.candidates
    group = args.query_heads // args.kv_heads

    def normal(*size: int) -> torch.Tensor:
        return torch.randn(*size, generator=generator, device=device).to(dtype)

    per_row = normal(rows, args.kv_heads, group, args.head_dim)
    prefix_keys = normal(args.prompts, args.kv_heads, args.prompt_tokens, args.head_dim)
    prefix_values = normal(args.prompts, args.kv_heads, args.prompt_tokens, args.head_dim)
    prefix_bias = torch.zeros((args.prompts, 1, 1, args.prompt_tokens), dtype=torch.float32, device=device)
    prefix_bias[1:, ..., : args.prompt_tokens // 10] = float("-inf")  # later prompts are shorter: left padding
    key = normal(rows, args.kv_heads, args.capacity, args.head_dim)
    value = normal(rows, args.kv_heads, args.capacity, args.head_dim)
    suffix_mask = torch.full((rows, 1, 1, args.capacity), float("-inf"), device=device)
    suffix_mask[..., : args.generated] = 0.0
    return per_row, prefix_keys, prefix_values, prefix_bias, key, value, suffix_mask, args.head_dim**-0.5, args.candidates


def kernel_inputs(name: str, inputs: tuple, per_prompt: int | None, generated: int) -> tuple:
    """`inputs` as kernel `name` takes them. The packed kernels (`PACKED_KERNELS`), as the decoder's
    steps call them, read the prefix packed (and chunked), and the suffix's `generated` written columns alone from
    token-major buffers."""
    if name not in PACKED_KERNELS:
        return inputs
    per_row, prefix_keys, prefix_values, prefix_bias, key, value, _, scale, repeats = inputs
    attention = (prefix_bias[:, 0, 0] == 0).long()
    per_prompt = 1 if name == "split_flash" else per_prompt
    chunks = prefix_chunks(attention, prefix_keys.shape[1], per_prompt, one_wave=name == "split_triton")
    tokens = prompt_tokens(attention)
    key, value = (tensor.transpose(1, 2).contiguous().transpose(1, 2) for tensor in (key, value))
    lengths = torch.full((per_row.shape[0],), generated, dtype=torch.int32, device=per_row.device)
    written = WrittenSuffix.of(lengths, 1, key.shape[2])
    packed = pack_prefix(prefix_keys, tokens), pack_prefix(prefix_values, tokens)
    return (per_row, *packed, chunks, key, value, None, scale, repeats, written)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--prompts", type=int, default=1)
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--prompt-tokens", type=int, default=6000)
    parser.add_argument("--capacity", type=int, default=1024, help="suffix columns (the decode budget)")
    parser.add_argument("--generated", type=int, default=300, help="suffix columns written so far")
    parser.add_argument("--layers", type=int, default=36)
    parser.add_argument("--query-heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--bandwidth", type=float, default=4300.0, help="GB/s the floor assumes (4,300 measured on an H200)")
    parser.add_argument("--kernels", default=None, help="comma-separated (default: all; split_flash only for one prompt)")
    parser.add_argument("--chunks", default=None,
                        help="the chunked kernels' chunks per prompt, comma-separated for a row each (default: their own choice)")
    args = parser.parse_args(argv)
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    generator = torch.Generator(device=device).manual_seed(0)
    layers = [layer_inputs(args, device, dtype, generator) for _ in range(args.layers)]
    element = torch.finfo(dtype).bits // 8
    rows = args.prompts * args.candidates
    floor_bytes = args.layers * 2 * element * args.kv_heads * args.head_dim * (args.prompts * args.prompt_tokens + rows * args.generated)
    floor_ms = floor_bytes / (args.bandwidth * 1e9) * 1e3
    print(
        f"{args.prompts} prompt(s) x {args.candidates} candidates, {args.prompt_tokens}-token prefix, {args.capacity}-column "
        f"suffix ({args.generated} written), {args.layers} layers, {args.query_heads}/{args.kv_heads} heads x {args.head_dim}, {dtype} on {device}"
    )
    print(f"| kernel | ms / step | x floor ({floor_ms:.3f} ms) | max abs error | first call s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    expected = reference(*layers[0])
    default = [name for name in PREFIX_KERNELS if name != "auto" and (name != "split_flash" or args.prompts == 1)]
    names = default if args.kernels is None else [kernel.strip() for kernel in args.kernels.split(",") if kernel.strip()]
    chunk_counts = [None] if args.chunks is None else [int(count) for count in args.chunks.split(",") if count.strip()]
    chunked = ("chunked_flash", "chunked_triton", "split_triton")
    for name, chunks in [(name, count) for name in names for count in (chunk_counts if name in chunked else [None])]:
        attend = attention_kernel(name)
        inputs_of = [kernel_inputs(name, inputs, chunks, args.generated) for inputs in layers]
        started = time.perf_counter()
        output = attend(*inputs_of[0])  # compiles where the kernel compiles
        first = time.perf_counter() - started
        error = (output.double() - expected).abs().max().item()
        for inputs in inputs_of:  # warm every size before capture
            attend(*inputs)
        ms = time_step(device, lambda: [attend(*inputs) for inputs in inputs_of], args.repeat)
        label = f"{name} ({inputs_of[0][3].per_prompt} chunks per prompt)" if name in chunked else name
        print(f"| {label} | {ms:.3f} | {ms / floor_ms:.2f} | {error:.2e} | {first:.1f} |", flush=True)
        del inputs_of
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
