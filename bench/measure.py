"""What the benchmarks share: timing a call on a device with its peak GPU memory, profiling one, and printing memory."""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from travel.generation.model_io import model_device

GIB = 1024**3


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(device: torch.device, run: Callable[[], Any]) -> tuple[float, int | None, Any]:
    """(seconds, peak GPU bytes or None off the GPU, result) of `run()`, the GPU's queued work included."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    synchronize(device)
    started = time.perf_counter()
    result = run()
    synchronize(device)
    seconds = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    return seconds, peak, result


def gib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / GIB:.2f}"


def above_weights(peak: int | None, weights: int | None) -> str:
    """Peak memory minus the weights loaded before the measurement."""
    return gib(None if peak is None or weights is None else peak - weights)


KERNEL_KINDS = (  # what a kernel's name says it does, first match wins (cuBLAS and FlashAttention both use CUTLASS)
    ("attention", ("_partials_kernel", "_merge_kernel", "flash", "fmha", "attention")),
    ("weight matmuls", ("gemm", "gemv", "nvjet", "cutlass", "xmma", "splitkreduce", "_split_k_kernel")),
    ("vocabulary sort", ("sort", "radix")),
)


def kernel_kind(name: str) -> str:
    lowered = name.lower()
    return next((kind for kind, marks in KERNEL_KINDS if any(mark in lowered for mark in marks)), "other (fused elementwise, reductions)")


def profile_call(device: torch.device, run: Callable[[], Any], steps: int = 1, row_limit: int = 30) -> tuple[float, float]:
    """(wall seconds, seconds of GPU kernels) of one `run()` under torch.profiler; prints the top operators by
    their own time (GPU kernels on CUDA, CPU elsewhere) and, on a GPU, the kernel time and launches by kind per
    one of the run's `steps`. Only kernel events count: an operator's row repeats the kernels it launched."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    synchronize(device)
    started = time.perf_counter()
    with profile(activities=activities) as profiler:
        run()
        synchronize(device)
    wall = time.perf_counter() - started
    events = profiler.key_averages()
    kernels = [event for event in events if event.device_type == DeviceType.CUDA]
    print(events.table(sort_by="self_device_time_total" if device.type == "cuda" else "self_cpu_time_total", row_limit=row_limit))
    if kernels:
        by_kind: dict[str, list[float]] = {}
        for event in kernels:
            totals = by_kind.setdefault(kernel_kind(event.key), [0.0, 0])
            totals[0] += event.self_device_time_total / 1000 / steps
            totals[1] += event.count / steps
        print("| kernels | ms / step | launches / step |\n| --- | ---: | ---: |")
        for kind, (ms, launches) in sorted(by_kind.items(), key=lambda item: -item[1][0]):
            print(f"| {kind} | {ms:.3f} | {launches:.0f} |")
    return wall, sum(event.self_device_time_total for event in kernels) / 1e6

def time_step(device: torch.device, step, repeat: int) -> float:
    """ms per call of `step`: replays of its CUDA graph on a GPU, plain calls elsewhere."""
    if device.type != "cuda":
        started = time.perf_counter()
        for _ in range(repeat):
            step()
        return (time.perf_counter() - started) * 1e3 / repeat
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()
        with torch.cuda.graph(graph, stream=stream):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeat


class DecoderCalls:
    """Records every `generate` call of the given structured decoders while active: its wall seconds (the GPU's
    queued work included), the decoder's own phases (`last_phases`: weights, prefill, decode steps), its decode
    steps and candidates. `totals()` sums them, so that a caller can tell the steps from everything around them."""

    def __init__(self, decoders: Any):
        self.decoders = list(dict.fromkeys(decoders))  # one decoder may serve several callers
        self.calls: list[dict[str, Any]] = []

    def __enter__(self) -> "DecoderCalls":
        for decoder in self.decoders:
            decoder.generate = self._recorded(decoder, decoder.generate)  # the instance's attribute shadows the method
        return self

    def __exit__(self, *exc: Any) -> None:
        for decoder in self.decoders:
            del decoder.generate

    def _recorded(self, decoder: Any, generate: Callable[..., Any]) -> Callable[..., Any]:
        def call(requests: Any, num_candidates: int, *args: Any, **kwargs: Any) -> Any:
            device = model_device(decoder.model)
            synchronize(device)
            started = time.perf_counter()
            out = generate(requests, num_candidates, *args, **kwargs)
            synchronize(device)
            self.calls.append({
                "seconds": time.perf_counter() - started,
                "phases": decoder.last_phases.seconds(),
                "steps": decoder.last_decode_steps,
                "candidates": num_candidates * len(out),
            })
            return out

        return call

    def totals(self) -> dict[str, float]:
        """Over the recorded calls: calls, seconds, weights, prefill, decode (the steps), steps, and `other`: the
        calls' seconds outside those phases (requests, masks, turning tokens into candidates)."""
        phases = {name: sum(c["phases"].get(name, 0.0) for c in self.calls) for name in ("weights", "prefill", "decode")}
        seconds = sum(c["seconds"] for c in self.calls)
        return {"calls": len(self.calls), "seconds": seconds, **phases, "steps": sum(c["steps"] for c in self.calls),
                "other": seconds - sum(phases.values())}
