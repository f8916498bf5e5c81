"""Signals during training (travel/checkpoint/signals.py): SIGTERM and SIGUSR2 become a stop request, the
handlers the run replaced come back after it, a SIGUSR2 stop is handed on to the handler it interrupted
(submitit's requeue) once the checkpoint is written, or after the run's cleanup when no checkpoint point comes
in time; a time-limit warning that came early lets the run train on to a later checkpoint point; and the small
pieces of state a resumed run needs back (the checkpoint cadence, the comparator's random stream)."""

from __future__ import annotations

import os
import signal
import time

import pytest
import torch

from travel.algorithms.preference.comparators import RngStream
from travel.checkpoint.signals import (
    RequeueWindow,
    RunInterrupted,
    hand_over,
    parse_slurm_duration,
    requeued_by_slurm,
    stop_on_signals,
)
from travel.checkpoint.store import CheckpointStore, checkpoint_point


@pytest.fixture
def submitit_like_handler():
    """A SIGUSR2 handler installed before the run, as submitit installs its checkpoint-and-requeue one."""
    calls = []
    previous = signal.signal(signal.SIGUSR2, lambda signum, frame: calls.append(signum))
    yield calls
    signal.signal(signal.SIGUSR2, previous)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR2])
def test_a_signal_during_the_run_is_a_stop_request_and_the_old_handler_comes_back(signum, submitit_like_handler):
    before = signal.getsignal(signum)
    with stop_on_signals() as stop:
        os.kill(os.getpid(), signum)
        time.sleep(0.05)
        assert stop.requested and stop.signum == signum and stop.reason == signal.Signals(signum).name
    assert signal.getsignal(signum) is before
    assert submitit_like_handler == []  # the run's handler took the signal


def test_only_a_sigusr2_stop_is_handed_on_to_the_handler_it_interrupted(submitit_like_handler):
    hand_over(RunInterrupted("SIGTERM at env step 4", signal.SIGTERM))
    assert submitit_like_handler == []
    hand_over(RunInterrupted("SIGUSR2 at env step 4", signal.SIGUSR2))
    assert submitit_like_handler == [signal.SIGUSR2]


def test_a_sigusr2_with_no_checkpoint_point_in_time_interrupts_the_run_and_is_handed_on_after_its_cleanup(
    submitit_like_handler,
):
    cleanup = []
    with pytest.raises(RunInterrupted, match="no checkpoint point within 0s of SIGUSR2") as interrupted:
        with stop_on_signals(RequeueWindow(signal_delay_s=0.4)) as stop:
            try:
                os.kill(os.getpid(), signal.SIGUSR2)
                time.sleep(0.05)
                assert stop.requested
                time.sleep(2)  # no checkpoint point: the grace ends inside the run
            finally:
                cleanup.append(list(submitit_like_handler))  # the tracker closes before any requeue
    assert cleanup == [[]] and submitit_like_handler == []
    hand_over(interrupted.value)
    assert submitit_like_handler == [signal.SIGUSR2]


def test_the_grace_timer_does_not_interrupt_the_checkpoint_a_stop_writes(tmp_path, submitit_like_handler):
    with pytest.raises(RunInterrupted, match="SIGUSR2 at env step 3: wrote") as interrupted:
        with stop_on_signals(RequeueWindow(signal_delay_s=0.4)) as stop:
            os.kill(os.getpid(), signal.SIGUSR2)
            time.sleep(0.05)
            slow_save = lambda: time.sleep(0.5) or tmp_path  # noqa: E731  (longer than the grace)
            checkpoint_point(CheckpointStore(tmp_path), stop, 3, at_eval_point=False, save=slow_save)
    assert interrupted.value.signum == signal.SIGUSR2 and submitit_like_handler == []


def test_a_run_that_stops_in_time_cancels_the_grace_timer(submitit_like_handler):
    with stop_on_signals(RequeueWindow(signal_delay_s=0.4)):
        os.kill(os.getpid(), signal.SIGUSR2)
        time.sleep(0.05)
    time.sleep(0.3)
    assert submitit_like_handler == [] and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def points_until_stop(stop, every_s: float, limit_s: float = 5.0) -> tuple[int, float]:
    """Checkpoint points `every_s` apart until the stop says stop here: (points passed, seconds waited)."""
    start, passed = time.monotonic(), 0
    while not stop.stops_here():
        assert time.monotonic() - start < limit_s, "the run never stopped"
        passed += 1
        time.sleep(every_s)
    return passed, time.monotonic() - start


def test_an_early_time_limit_warning_trains_on_while_the_next_point_fits_before_the_delay_remains(
    submitit_like_handler,
):
    window = RequeueWindow(signal_delay_s=1.0, end=time.monotonic() + 2.0)  # stop by 1.0 s from now
    with stop_on_signals(window) as stop:
        os.kill(os.getpid(), signal.SIGUSR2)
        time.sleep(0.05)
        passed, waited = points_until_stop(stop, every_s=0.1)
    assert passed >= 5 and waited < 1.0, (passed, waited)  # on to the last point that fits, not past it


@pytest.mark.parametrize("window", [RequeueWindow(signal_delay_s=1.0), "preemption", None], ids=["no-limit", "preemption", "no-window"])
def test_a_sigusr2_stops_at_the_next_point_without_a_known_limit_or_long_before_it(window, submitit_like_handler):
    if window == "preemption":  # the limit is far beyond Slurm's early-warning window
        window = RequeueWindow(signal_delay_s=1.0, end=time.monotonic() + 1000.0)
    with stop_on_signals(window) as stop:
        os.kill(os.getpid(), signal.SIGUSR2)
        time.sleep(0.05)
        assert points_until_stop(stop, every_s=0.1)[0] == 0


def test_after_an_early_warning_the_timer_fires_when_half_the_delay_remains(submitit_like_handler):
    window = RequeueWindow(signal_delay_s=1.0, end=time.monotonic() + 2.0)
    with pytest.raises(RunInterrupted) as interrupted:
        with stop_on_signals(window):
            os.kill(os.getpid(), signal.SIGUSR2)
            time.sleep(1.0)  # past the half delay after the signal: not interrupted yet
            fired_late = time.monotonic()
            time.sleep(3)
    assert window.end - 0.5 <= time.monotonic() < window.end and fired_late < window.end - 0.5
    assert interrupted.value.signum == signal.SIGUSR2


def test_slurm_durations_parse_to_seconds_and_anything_else_to_none():
    assert parse_slurm_duration("59:58") == 3598
    assert parse_slurm_duration("2:03:04") == 7384
    assert parse_slurm_duration("1-02:03:04") == 93784
    assert [parse_slurm_duration(text) for text in ("UNLIMITED", "NOT_SET", "INVALID", "", "1:2:3:4", "-1:00")] == [None] * 6


def test_a_requeued_job_is_recognised_by_its_restart_count(monkeypatch):
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    assert not requeued_by_slurm()
    monkeypatch.setenv("SLURM_RESTART_COUNT", "0")
    assert not requeued_by_slurm()
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    assert requeued_by_slurm()


def test_a_resumed_store_counts_its_cadence_from_the_checkpoint_it_resumed(tmp_path):
    store = CheckpointStore(tmp_path, every_env_steps=4, last_env_step=8)
    assert not store.due(10, at_eval_point=True) and store.due(12, at_eval_point=False)
    assert CheckpointStore(tmp_path, every_env_steps=4).due(10, at_eval_point=False)  # a fresh run: at once


def test_the_comparator_stream_continues_where_its_saved_state_left_it():
    stream = RngStream(7)
    torch.rand(3, generator=stream.generator("cpu"))
    state = stream.state()
    expected = torch.rand(5, generator=stream.generator("cpu"))
    restored = RngStream(7)
    restored.restore(state)
    assert torch.equal(torch.rand(5, generator=restored.generator("cpu")), expected)
