"""Signals during training (travel/checkpoint/signals.py): SIGTERM and SIGUSR2 become a stop request, the
handlers the run replaced come back after it, a SIGUSR2 stop is handed on to the handler it interrupted
(submitit's requeue) once the checkpoint is written, or after the run's cleanup when no checkpoint point comes
in time; and
the small pieces of state a resumed run needs back (the checkpoint cadence, the comparator's random stream)."""

from __future__ import annotations

import os
import signal
import time

import pytest
import torch

from travel.algorithms.comparators import RngStream
from travel.checkpoint.signals import RunInterrupted, hand_over, requeued_by_slurm, stop_on_signals
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
    with pytest.raises(RunInterrupted, match="no checkpoint point within 0.2s of SIGUSR2") as interrupted:
        with stop_on_signals(requeue_grace_s=0.2) as stop:
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
        with stop_on_signals(requeue_grace_s=0.2) as stop:
            os.kill(os.getpid(), signal.SIGUSR2)
            time.sleep(0.05)
            slow_save = lambda: time.sleep(0.5) or tmp_path  # noqa: E731  (longer than the grace)
            checkpoint_point(CheckpointStore(tmp_path), stop, 3, at_eval_point=False, save=slow_save)
    assert interrupted.value.signum == signal.SIGUSR2 and submitit_like_handler == []


def test_a_run_that_stops_in_time_cancels_the_grace_timer(submitit_like_handler):
    with stop_on_signals(requeue_grace_s=0.2):
        os.kill(os.getpid(), signal.SIGUSR2)
        time.sleep(0.05)
    time.sleep(0.3)
    assert submitit_like_handler == [] and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


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
