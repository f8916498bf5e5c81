"""Signals during training: the trainer writes a checkpoint at its next checkpoint point and the run stops.

- SIGTERM (any launcher): checkpoint, then exit; `resume=auto` continues.
- SIGUSR2: Slurm's warning `hydra.launcher.signal_delay_s` before a job's time limit or a preemption. After the
  checkpoint, the handler that was installed before the run (submitit's, under hydra/launcher=submitit_slurm)
  requeues the job (at most `hydra.launcher.max_num_timeout` times for time limits); the requeued job runs the
  same command and, Slurm having set SLURM_RESTART_COUNT, resumes from the newest checkpoint (Run.resume).

`stop_on_signals()` installs the handlers for the body of a training run and restores the previous ones after.
The trainer polls `StopRequest.requested`; once it has written the checkpoint it raises `RunInterrupted`, so
the run's status says `failed` with where it stopped; `hand_over(interrupted)` then passes a SIGUSR2 on to the
handler it interrupted. A run that reaches no checkpoint point within `requeue_grace_s` of a SIGUSR2 (in its
final evaluation, say) is interrupted there (RunInterrupted from the timer) and handed over after its cleanup, so
the requeued job resumes from the previous checkpoint: a job killed at its time limit would not be requeued at
all. The hand-over comes after the cleanup because a requeue sends SIGTERM to every process of the job, the
W&B service among them: a run still logging then would fail, and that failure would be the job's result.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any, Iterator, Optional

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR2)


class RunInterrupted(RuntimeError):
    """The run stopped on a signal after writing a checkpoint."""

    def __init__(self, message: str, signum: Optional[int] = None):
        super().__init__(message)
        self.signum = signum


class StopRequest:
    def __init__(self) -> None:
        self.requested = False
        self.reason = ""
        self.signum: Optional[int] = None

    def request(self, reason: str, signum: Optional[int] = None) -> None:
        self.requested, self.reason, self.signum = True, reason, signum

    def checkpoint_reached(self) -> None:
        """The trainer is writing the stop's checkpoint: the requeue grace timer must not interrupt it."""
        signal.setitimer(signal.ITIMER_REAL, 0)


@contextlib.contextmanager
def stop_on_signals(requeue_grace_s: Optional[float] = None) -> Iterator[StopRequest]:
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield stop
        return
    previous = {signum: signal.getsignal(signum) for signum in (*STOP_SIGNALS, signal.SIGALRM)}

    def requested(number: int, frame: Any) -> None:
        stop.request(signal.Signals(number).name, number)
        if number == signal.SIGUSR2 and requeue_grace_s and callable(previous[signal.SIGUSR2]):
            signal.setitimer(signal.ITIMER_REAL, requeue_grace_s)

    def overdue(number: int, frame: Any) -> None:
        raise RunInterrupted(
            f"no checkpoint point within {requeue_grace_s:g}s of SIGUSR2: the job is requeued and resumes from the "
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


def requeue_grace_s() -> Optional[float]:
    """Half of the launcher's `signal_delay_s` (Slurm may send the warning up to a minute early, never late), or
    None outside a Hydra job whose launcher has one."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    delay = HydraConfig.get().launcher.get("signal_delay_s")
    return float(delay) / 2 if delay else None
