"""Signals during training: the trainer writes a checkpoint at its next checkpoint point and the run stops.

- SIGTERM (any launcher): checkpoint, then exit; `resume=auto` continues.
- SIGUSR2: Slurm's warning `hydra.launcher.signal_delay_s` before a job's time limit or a preemption. After the
  checkpoint, the handler that was installed before the run (submitit's, under hydra/launcher=submitit_slurm)
  requeues the job (at most `hydra.launcher.max_num_timeout` times for time limits); the requeued job runs the
  same command and, Slurm having set SLURM_RESTART_COUNT, resumes from the newest checkpoint (Run.resume).

`stop_on_signals()` installs the handlers for the body of a training run and restores the previous ones after.
At each checkpoint point the trainer asks `StopRequest.stops_here()`; once it has written the stop's checkpoint
it raises `RunInterrupted`, so the run's status says `stopped` with where it stopped; `hand_over(interrupted)`
then passes a SIGUSR2 on to the handler it interrupted. A run that reaches no checkpoint point in time (in its
final evaluation, say) is interrupted where it is (RunInterrupted from a timer) and handed over after its
cleanup, so the requeued job resumes from the previous checkpoint: a job killed at its time limit would not be
requeued at all. The hand-over comes after the cleanup because a requeue sends SIGTERM to every process of the
job, the W&B service among them: a run still logging then would fail, and that failure would be the job's
result.

Slurm checks time limits on a 30-second cycle and sends the warning up to a minute early. The run asks Slurm for
its time limit when it starts (`RequeueWindow.for_this_job`); after a warning that came early it trains on
while the next checkpoint point is expected (the longest interval between points so far) before
`signal_delay_s` remain, and the timer fires when half of `signal_delay_s` remains. A SIGUSR2 long before that
window is a preemption: the run stops at its next checkpoint point, and the timer fires half of
`signal_delay_s` after the signal (also when Slurm's time limit is not known).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Iterator, Optional

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR2)


class RunInterrupted(RuntimeError):
    """The run stopped on a signal after writing a checkpoint."""

    def __init__(self, message: str, signum: Optional[int] = None):
        super().__init__(message)
        self.signum = signum


@dataclass(frozen=True)
class RequeueWindow:
    """The time a Slurm job has when SIGUSR2 comes: the launcher's `signal_delay_s` (what the job keeps for
    writing its checkpoint and handing over) and `end`, the time.monotonic() of its time limit (None when Slurm
    did not say)."""

    signal_delay_s: float
    end: Optional[float] = None
    # the warning comes up to a minute before `signal_delay_s`, on a 30-second cycle; earlier is a preemption
    EARLY_WARNING_S: ClassVar[float] = 90.0

    @classmethod
    def for_this_job(cls) -> Optional["RequeueWindow"]:
        """From the Hydra launcher's `signal_delay_s` and Slurm's time left for this job; None outside a Hydra
        job whose launcher has one."""
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return None
        delay = HydraConfig.get().launcher.get("signal_delay_s")
        if not delay:
            return None
        left = slurm_time_left_s()
        return cls(float(delay), None if left is None else time.monotonic() + left)

    def _time_limit_warning(self, signalled_at: float) -> bool:
        return self.end is not None and signalled_at >= self.end - self.signal_delay_s - self.EARLY_WARNING_S

    def stop_by(self, signalled_at: float) -> float:
        """The latest time.monotonic() at which the stop's checkpoint begins."""
        return self.end - self.signal_delay_s if self._time_limit_warning(signalled_at) else signalled_at

    def interrupt_at(self, signalled_at: float) -> float:
        """When a run that has reached no checkpoint point by then is interrupted."""
        if self._time_limit_warning(signalled_at):
            return self.end - self.signal_delay_s / 2
        return signalled_at + self.signal_delay_s / 2


class StopRequest:
    def __init__(self, window: Optional[RequeueWindow] = None) -> None:
        self.requested = False
        self.reason = ""
        self.signum: Optional[int] = None
        self.window = window
        self.signalled_at: Optional[float] = None
        self._last_point = time.monotonic()
        self._longest_interval = 0.0
        self._trained_on = False

    def request(self, reason: str, signum: Optional[int] = None) -> None:
        self.requested, self.reason, self.signum = True, reason, signum
        self.signalled_at = time.monotonic()

    def stops_here(self) -> bool:
        """Asked at every checkpoint point: whether the run writes the stop's checkpoint here. After SIGUSR2 with a
        window the run goes on while the next point is expected before the window's `stop_by`."""
        now = time.monotonic()
        self._longest_interval = max(self._longest_interval, now - self._last_point)
        self._last_point = now
        if not self.requested:
            return False
        if self.signum == signal.SIGUSR2 and self.window is not None and self.signalled_at is not None:
            stop_by = self.window.stop_by(self.signalled_at)
            if now + self._longest_interval < stop_by:
                if not self._trained_on:
                    print(f"SIGUSR2 came early: training on while checkpoint points fit in the {stop_by - now:.0f}s "
                          f"before {self.window.signal_delay_s:g}s of the job's time remain")
                    self._trained_on = True
                return False
        return True

    def checkpoint_reached(self) -> None:
        """The trainer is writing the stop's checkpoint: the requeue timer must not interrupt it."""
        signal.setitimer(signal.ITIMER_REAL, 0)


@contextlib.contextmanager
def stop_on_signals(window: Optional[RequeueWindow] = None) -> Iterator[StopRequest]:
    """The run's handlers of SIGTERM and SIGUSR2 for the body of the `with`; `window` (a Slurm job's) arms the
    requeue timer on SIGUSR2 when a handler was installed before the run (submitit's)."""
    stop = StopRequest(window)
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield stop
        return
    previous = {signum: signal.getsignal(signum) for signum in (*STOP_SIGNALS, signal.SIGALRM)}

    def requested(number: int, frame: Any) -> None:
        stop.request(signal.Signals(number).name, number)
        if number == signal.SIGUSR2 and window is not None and callable(previous[signal.SIGUSR2]):
            signal.setitimer(signal.ITIMER_REAL, max(window.interrupt_at(stop.signalled_at) - time.monotonic(), 0.01))

    def overdue(number: int, frame: Any) -> None:
        waited = time.monotonic() - (stop.signalled_at or time.monotonic())
        raise RunInterrupted(
            f"no checkpoint point within {waited:.0f}s of SIGUSR2: the job is requeued and resumes from the "
            f"previous checkpoint",
            signal.SIGUSR2,
        )

    for signum in STOP_SIGNALS:
        signal.signal(signum, requested)
    signal.signal(signal.SIGALRM, overdue)
    try:
        yield stop
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def hand_over(interrupted: RunInterrupted) -> None:
    """After a run stopped on SIGUSR2 has written its checkpoint: the SIGUSR2 handler installed before the run
    (submitit's checkpoint-and-requeue) gets the signal it would have had. Nothing for SIGTERM, or without one."""
    if interrupted.signum != signal.SIGUSR2:
        return
    handler = signal.getsignal(signal.SIGUSR2)
    if callable(handler):
        handler(signal.SIGUSR2, None)


def requeued_by_slurm() -> bool:
    """This process is a Slurm job that was requeued (SLURM_RESTART_COUNT >= 1)."""
    try:
        return int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0) > 0
    except ValueError:
        return False


def slurm_time_left_s() -> Optional[float]:
    """Seconds until this Slurm job's time limit (`squeue -o %L`), or None outside a job, without a limit, or
    when squeue does not answer."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    try:
        listing = subprocess.run(["squeue", "-h", "-j", job, "-o", "%L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_slurm_duration(listing.stdout.strip()) if listing.returncode == 0 else None


def parse_slurm_duration(text: str) -> Optional[float]:
    """Seconds of a Slurm duration, `[days-][hours:]minutes:seconds` (`1-02:03:04`, `2:03:04`, `59:58`); None
    for anything else (`UNLIMITED`, `NOT_SET`, `INVALID`)."""
    days, _, clock = text.rpartition("-") if "-" in text else ("0", "", text)
    parts = clock.split(":")
    if not 2 <= len(parts) <= 3 or not all(part.isdigit() for part in (days, *parts)):
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return float(seconds + int(days) * 86400)
