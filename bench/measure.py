"""What the benchmarks share: timing a call on a device with its peak GPU memory, and printing memory."""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

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
