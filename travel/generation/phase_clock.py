"""The seconds one decode call spends in each of its phases (the weight copy's refresh, the prefill, the decode steps).

A decode call's wall time per step amortises its prefill: for one candidate of a 6,000-token prompt on a 4B model
the prefill is a sizeable share of 256 steps. A step's own cost is the decode phase alone. On a GPU the marks are
CUDA events recorded on the device's current stream, so timing adds no synchronisation to the call; `seconds()`
reads them afterwards, waiting for the last. Elsewhere every operation runs synchronously and the marks are wall-clock
times.
"""

from __future__ import annotations

import time
from typing import Any

import torch


class PhaseClock:
    """Marks on `device`'s clock: `mark(phase)` ends `phase`, which began at the mark before (the clock's start)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.marks: list[tuple[str, Any]] = []
        self.mark("start")

    def mark(self, phase: str) -> None:
        if self.device.type == "cuda":
            stamp = torch.cuda.Event(enable_timing=True)
            stamp.record(torch.cuda.current_stream(self.device))
        else:
            stamp = time.perf_counter()
        self.marks.append((phase, stamp))

    def seconds(self) -> dict[str, float]:
        """Each marked phase's seconds, in the order marked."""
        events = self.device.type == "cuda"
        if events:
            self.marks[-1][1].synchronize()
        return {
            phase: before.elapsed_time(after) / 1000.0 if events else after - before  # events measure milliseconds
            for (_, before), (phase, after) in zip(self.marks, self.marks[1:])
        }
