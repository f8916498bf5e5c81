"""The phases of a decode call (travel/generation/phase_clock.py): the clock's marks time what ran between them, and a
decoder's call says how long its weight refresh, prefill and decode steps took, together no longer than the call."""

from __future__ import annotations

import time

import torch

from tests.generation.conftest import short_request
from travel.generation import StructuredDecoder
from travel.generation.phase_clock import PhaseClock


def test_each_phase_runs_from_the_mark_before_to_its_own():
    started = time.perf_counter()
    clock = PhaseClock(torch.device("cpu"))
    time.sleep(0.02)
    clock.mark("first")
    time.sleep(0.06)
    clock.mark("second")
    wall = time.perf_counter() - started
    seconds = clock.seconds()
    assert list(seconds) == ["first", "second"]
    assert seconds["first"] >= 0.02 and seconds["second"] >= 0.06 and seconds["first"] + seconds["second"] <= wall


def test_a_decode_call_times_its_prefill_apart_from_its_steps(tiny):
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, max_new_tokens=160, max_value_tokens=4, fill_budget=True)
    request = short_request(tiny.tokenizer, 1, 2, note="A long note. " * 40)
    started = time.perf_counter()
    decoder.generate([request], 2, seeds=[0])
    wall = time.perf_counter() - started
    seconds = decoder.last_phases.seconds()
    assert list(seconds) == ["weights", "prefill", "decode"]
    assert all(value >= 0 for value in seconds.values()) and sum(seconds.values()) <= wall
    # one forward over the prompt, which chooses the first token, against one per later token (159 steps)
    assert decoder.last_decode_steps == 159 and 0 < seconds["prefill"] < seconds["decode"] / 10
