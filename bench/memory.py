"""GPU memory figures the benchmarks print: GiB with two decimals, 'n/a' off the GPU."""

from __future__ import annotations

GIB = 1024**3


def gib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / GIB:.2f}"


def above_weights(peak: int | None, weights: int | None) -> str:
    """Peak memory minus the weights loaded before the measurement."""
    return gib(None if peak is None or weights is None else peak - weights)
