"""SIGTERM during training: the trainer writes a checkpoint at the next buffer boundary and the run stops.

`stop_on_sigterm()` installs the handler for the body of a training run and restores the previous one after.
The trainer polls `StopRequest.requested`; once it has written the checkpoint it raises `RunInterrupted`, so
the run's status says `failed` with where it stopped, and `resume=auto` continues from that checkpoint.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator


class RunInterrupted(RuntimeError):
    """The run stopped on a signal after writing a checkpoint."""


class StopRequest:
    def __init__(self) -> None:
        self.requested = False
        self.reason = ""

    def request(self, reason: str) -> None:
        self.requested, self.reason = True, reason


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[StopRequest]:
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield stop
        return
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.request("SIGTERM"))
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)
