"""Stopping child processes in tests: SIGKILL at a random point of repeated work (the atomic-write tests), and
SIGTERM to a training run once it reached a given point (the resume tests)."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import subprocess
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


def terminate_when(child: subprocess.Popen, ready: Callable[[], bool], what: str, timeout_s: float = 600) -> None:
    """Wait until `ready()` (the run reached `what`), send the child SIGTERM and wait for it to stop; the run must
    not have finished on its own first."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert child.poll() is None and time.monotonic() < deadline, f"the run ended before {what}"
        time.sleep(0.05)
    child.send_signal(signal.SIGTERM)
    child.communicate(timeout=timeout_s)
    assert child.returncode != 0, f"the run finished before the signal reached a checkpoint point ({what})"
