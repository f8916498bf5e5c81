"""generation.jump_forced (travel/generation/kernels/jump_step.py, decode_loop.py): feeding whole forced runs in one
forward gives exactly the tokens, texts and value masks of the one-token decoder, greedy and seeded, for both
roles and the joint action, free and catalog values, over the repeated and the shared prompt cache; log-probs
agree to float rounding. And it takes far fewer forwards: about one per value token plus one per slot."""

from __future__ import annotations

import pytest

from tests.fixtures import fixture_row
from tests.generation.conftest import short_request
from travel.agents.models import build_tiny_random
from travel.generation import StructuredDecoder, joint_request, role_request
from travel.generation.decode_loop import DONE_CHECK_INTERVAL
from travel.generation.skeleton import build_slot_plan


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_random(seed=1)


def decoded(decoder, requests, greedy, seeds=(3, 11, 7)):
    groups = decoder.generate(
        requests, 3, greedy=greedy, return_logprobs=True, seeds=None if greedy else list(seeds[: len(requests)])
    )
    return [(c.text, c.token_ids.tolist(), c.value_mask.tolist(), c.logprob) for group in groups for c in group]


def assert_same(jumped, stepped):
    assert [c[:3] for c in jumped] == [c[:3] for c in stepped]
    assert [c[3] for c in jumped] == pytest.approx([c[3] for c in stepped], rel=1e-4, abs=1e-5)


def decoders(tiny, share, **settings):
    common = {"step_backend": "static", "share_prompt_cache": share, "temperature": 0.8, "top_p": 0.9, **settings}
    return (
        StructuredDecoder(tiny.model, tiny.tokenizer, jump_forced=True, **common),
        StructuredDecoder(tiny.model, tiny.tokenizer, **common),
    )


@pytest.mark.parametrize("share", ["always", "never"], ids=["shared-prompt", "repeated-prompt"])
@pytest.mark.parametrize("greedy", [True, False], ids=["greedy", "seeded"])
def test_both_roles_free_text_decode_as_one_token_steps_do(tiny, share, greedy):
    requests = [short_request(tiny.tokenizer, agent, 3) for agent in (0, 1)]
    jumped, stepped = decoders(tiny, share, max_new_tokens=400, max_value_tokens=5)
    assert_same(decoded(jumped, requests, greedy), decoded(stepped, requests, greedy))


@pytest.mark.parametrize("greedy", [True, False], ids=["greedy", "seeded"])
def test_a_tight_budget_forces_closes_as_one_token_steps_do(tiny, greedy):
    """Five days, 40 tokens above the all-'-' action: budget-forced closes in most candidates."""
    minimum = max(build_slot_plan(tiny.tokenizer, agent, 5).minimum_tokens for agent in (0, 1))
    requests = [short_request(tiny.tokenizer, agent, 5) for agent in (0, 1)]
    jumped, stepped = decoders(tiny, "always", max_new_tokens=minimum + 40, max_value_tokens=6)
    assert_same(decoded(jumped, requests, greedy), decoded(stepped, requests, greedy))


@pytest.mark.parametrize("greedy", [True, False], ids=["greedy", "seeded"])
def test_the_joint_action_and_catalog_values_decode_as_one_token_steps_do(tiny, greedy):
    row = fixture_row()
    requests = [
        joint_request(tiny.tokenizer, row, values="catalog"),
        role_request(tiny.tokenizer, row, 1, values="catalog"),
    ]
    jumped, stepped = decoders(tiny, "always", max_new_tokens=700, values="catalog")
    assert_same(decoded(jumped, requests[:1], greedy), decoded(stepped, requests[:1], greedy))
    assert_same(decoded(jumped, requests[1:], greedy), decoded(stepped, requests[1:], greedy))


def test_an_action_costs_about_one_forward_per_value_token_plus_one_per_slot(tiny):
    request = short_request(tiny.tokenizer, 1, 3)
    slots = build_slot_plan(tiny.tokenizer, 1, 3).num_slots
    forwards, calls = {}, []
    hook = tiny.model.get_decoder().register_forward_pre_hook(lambda module, args: calls.append(1))  # every forward runs it
    try:
        for jump in (False, True):
            decoder = StructuredDecoder(
                tiny.model, tiny.tokenizer, step_backend="static", max_new_tokens=400, max_value_tokens=3, jump_forced=jump
            )
            calls.clear()
            (candidate,) = decoder.generate([request], 1, greedy=True)[0]
            forwards[jump] = len(calls) - 1  # the prefill
            assert decoder.last_decode_steps == forwards[jump]
    finally:
        hook.remove()
    value_tokens = int(candidate.value_mask.sum())
    assert forwards[False] >= len(candidate.token_ids) - 1
    # each value token (its closing quote included) is one iteration, a forced close of a capped value one more;
    # the loop notices that every row is done at most DONE_CHECK_INTERVAL iterations late
    assert forwards[True] <= value_tokens + slots + DONE_CHECK_INTERVAL
    assert forwards[True] < forwards[False] / 2


def test_jump_forced_is_part_of_the_settings_a_comparator_decoder_copies(tiny):
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, jump_forced=True)
    assert decoder.with_model(tiny.model).jump_forced
    assert decoder._static_backend(tiny.model, tiny.model.device, True) == "static"  # auto on the CPU
