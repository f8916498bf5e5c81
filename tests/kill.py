"""Killing a child process with SIGKILL at a random point of repeated work (the atomic-write tests)."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from typing import Any, Callable


def kill_at_random_point(work: Callable[..., None], args: tuple[Any, ...], rng: random.Random, most_done: int, pause_s: float) -> None:
    """Run `work(*args, counter)` in a forked child, which adds 1 to `counter` after each complete unit; wait
    until it completed a random number (0..most_done-1) of units, then a random part of `pause_s` more, and
    SIGKILL it."""
    context = multiprocessing.get_context("fork")
    counter = context.Value("i", 0)
    child = context.Process(target=work, args=(*args, counter))
    child.start()
    target = rng.randrange(most_done)
    deadline = time.monotonic() + 60
    while counter.value < target and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(rng.uniform(0.0, pause_s))
    os.kill(child.pid, signal.SIGKILL)
    child.join()
