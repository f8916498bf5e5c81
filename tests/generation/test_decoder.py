"""StructuredDecoder with the tiny random model: strict actions for many seeds, budgets, one shared prefill."""

from __future__ import annotations

import pytest
import torch

from tests.fixtures import five_day_fixture_row, fixture_row
from tests.generation.conftest import assert_strict_action, short_request
from tests.generation.scripted import BiasedLM, RecordingLM
from travel.generation import DecodeRequest, StructuredDecoder, role_request
from travel.generation.skeleton import SEQUENCES_PER_SLOT, build_slot_plan
from travel.task.fields import owned_slots
from travel.task.roles import format_action


@pytest.mark.parametrize("days, max_value_tokens, slack", [(3, 4, 1024), (5, 6, 40)])
def test_two_hundred_seeds_give_strict_actions_for_both_roles(tiny, days, max_value_tokens, slack):
    """Candidate j of a request samples from seed j: 200 seeds per role. On 5-day rows the budget is only
    40 tokens above the larger all-'-' action, so budget-forced closes happen in most candidates.
    (top_p=1 keeps the CPU cost down: the nucleus changes which legal token is drawn, never legality;
    test_real_role_prompts_with_default_budget samples with the default 0.8.)"""
    tokenizer = tiny.tokenizer
    minimum = max(build_slot_plan(tokenizer, agent, days).minimum_tokens for agent in (0, 1))
    budget = min(1024, minimum + slack)
    decoder = StructuredDecoder(
        tiny.model, tokenizer, max_new_tokens=budget, max_value_tokens=max_value_tokens, temperature=0.7, top_p=1.0
    )
    requests = [short_request(tokenizer, agent, days) for agent in (0, 1)]
    groups = decoder.generate(requests, 200, seeds=[0, 0])
    forced_tokens = {agent: build_slot_plan(tokenizer, agent, days) for agent in (0, 1)}
    distinct = set()
    for request, group in zip(requests, groups):
        assert len(group) == 200
        for candidate in group:
            values = assert_strict_action(candidate.text, request.agent_id, days)
            assert all(value.strip() for value in values)
            assert len(candidate.token_ids) == len(candidate.value_mask) <= budget
            assert candidate.text.startswith(forced_tokens[request.agent_id].prefix)
            assert candidate.text.endswith('"}]}')
            # The forced tokens are exactly the schema: removing the value tokens leaves the all-'-'-free skeleton.
            forced_text = tokenizer.decode(candidate.token_ids[~candidate.value_mask].tolist())
            assert forced_text.endswith("}]}") and forced_text.count('"value": "') == len(values) - 1
            distinct.add(candidate.text)
    assert len(distinct) > 390  # 400 samples of random text: essentially all different


def test_value_mask_marks_exactly_the_sampled_tokens(tiny):
    """Walk each candidate slot by slot: a run of mask-1 tokens (the sampled value) is followed by mask-0
    tokens that are exactly one forced sequence of that slot, the suffix alone after a voluntary closing
    quote, a close + suffix otherwise. So the mask sum is the number of sampled value tokens."""
    tokenizer = tiny.tokenizer
    quote = tokenizer.encode('"', add_special_tokens=False)[0]
    model = BiasedLM(tiny.model, quote, 3.0)  # voluntary closes become common
    decoder = StructuredDecoder(model, tokenizer, max_new_tokens=120, max_value_tokens=5)
    plan = build_slot_plan(tokenizer, 1, 3)
    (group,) = decoder.generate([short_request(tokenizer, 1, 3)], 12, seeds=[7])
    codes_seen = set()
    for candidate in group:
        ids, mask = candidate.token_ids.tolist(), candidate.value_mask.tolist()
        position, sampled = 0, 0
        for slot in range(plan.num_slots):
            start = position
            while position < len(ids) and mask[position]:
                position += 1
            value_ids = ids[start:position]
            sampled += len(value_ids)
            assert len(value_ids) <= 5
            matches = [
                code
                for code in range(SEQUENCES_PER_SLOT)
                if tuple(ids[position : position + len(plan.sequences[plan.sequence_id(slot, code)])])
                == plan.sequences[plan.sequence_id(slot, code)]
            ]
            assert len(matches) == 1, (slot, ids[position:])
            code = matches[0]
            codes_seen.add(code == 0)
            closed_voluntarily = tokenizer.decode(value_ids).endswith('"') and value_ids != []
            assert closed_voluntarily == (code == 0)
            position += len(plan.sequences[plan.sequence_id(slot, code)])
            assert not any(mask[start + len(value_ids) : position])
        assert position == len(ids) and sampled == int(candidate.value_mask.sum())
    assert codes_seen == {True, False}  # both voluntary and forced closes occurred


def test_real_role_prompts_with_default_budget(tiny):
    """Both roles on the 3-day and 5-day fixture rows, full role prompts, default 1024 / 32 budget."""
    tokenizer = tiny.tokenizer
    decoder = StructuredDecoder(tiny.model, tokenizer)
    for row in (fixture_row(), five_day_fixture_row()):
        requests = [role_request(tokenizer, row, agent) for agent in (0, 1)]
        groups = decoder.generate(requests, 2, generator=torch.Generator().manual_seed(row.days), return_logprobs=True)
        for request, group in zip(requests, groups):
            assert request.prompt.endswith(build_slot_plan(tokenizer, request.agent_id, row.days).prefix)
            for candidate in group:
                assert_strict_action(candidate.text, request.agent_id, row.days)
                assert len(candidate.token_ids) <= 1024
                assert candidate.logprob is not None and candidate.logprob < 0
                assert torch.equal(candidate.prompt_ids, torch.tensor(request.prompt_ids))


def test_budget_equal_to_the_all_dash_action_yields_it_and_less_is_refused(tiny):
    tokenizer = tiny.tokenizer
    for agent in (0, 1):
        slots = owned_slots(agent, 3)
        tail = "".join('-"' + suffix for suffix in build_slot_plan(tokenizer, agent, 3).suffixes)
        minimum = sum(
            len(tokenizer.encode('-"', add_special_tokens=False)) + len(tokenizer.encode(s, add_special_tokens=False))
            for s in build_slot_plan(tokenizer, agent, 3).suffixes
        )
        decoder = StructuredDecoder(tiny.model, tokenizer, max_new_tokens=minimum)
        (group,) = decoder.generate([short_request(tokenizer, agent, 3)], 3, seeds=[1])
        for candidate in group:
            assert candidate.text == format_action(agent, [(d, f, "-") for d, f in slots])
            assert candidate.text.endswith(tail)
            assert int(candidate.value_mask.sum()) == 0 and len(candidate.token_ids) == minimum
        too_small = StructuredDecoder(tiny.model, tokenizer, max_new_tokens=minimum - 1)
        with pytest.raises(ValueError, match=f"max_new_tokens={minimum - 1}.*needs {minimum} tokens"):
            too_small.generate([short_request(tokenizer, agent, 3)], 1)


def test_budget_is_never_exceeded_near_the_minimum(tiny):
    tokenizer = tiny.tokenizer
    minimum = build_slot_plan(tokenizer, 1, 3).minimum_tokens
    for extra in (1, 2, 3, 5, 8, 13):
        decoder = StructuredDecoder(tiny.model, tokenizer, max_new_tokens=minimum + extra, max_value_tokens=32)
        (group,) = decoder.generate([short_request(tokenizer, 1, 3)], 4, seeds=[extra])
        for candidate in group:
            assert_strict_action(candidate.text, 1, 3)
            assert len(candidate.token_ids) <= minimum + extra


def test_greedy_is_deterministic(tiny):
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, max_new_tokens=200, max_value_tokens=8)
    request = short_request(tiny.tokenizer, 0, 3)
    first = decoder.generate([request], 1, greedy=True)[0][0]
    second = decoder.generate([request], 1, greedy=True)[0][0]
    assert torch.equal(first.token_ids, second.token_ids) and first.text == second.text
    assert_strict_action(first.text, 0, 3)


def test_one_prefill_serves_all_candidates_and_matches_separate_decodes(tiny):
    tokenizer = tiny.tokenizer
    recording = RecordingLM(tiny.model)
    decoder = StructuredDecoder(recording, tokenizer, max_new_tokens=150, max_value_tokens=6)
    request = short_request(tokenizer, 1, 3)
    prompt_length = len(tokenizer.encode(request.prompt, add_special_tokens=False))

    shared = decoder.generate([request], 4, greedy=True)[0]
    prefills = [shape for shape in recording.shapes if shape[1] > 1]
    assert prefills == [(1, prompt_length)]  # the prompt went through the model once, not 4 times
    assert all(shape == (4, 1) for shape in recording.shapes[1:])

    separate = [decoder.generate([request], 1, greedy=True)[0][0] for _ in range(4)]
    for one, other in zip(shared, separate):
        assert torch.equal(one.token_ids, other.token_ids) and torch.equal(one.value_mask, other.value_mask)

    # Seeded sampling: candidate j of a seed-s request is the single candidate of a seed-(s+j) request.
    sampled = decoder.generate([request], 3, seeds=[100])[0]
    for j, candidate in enumerate(sampled):
        alone = decoder.generate([request], 1, seeds=[100 + j])[0][0]
        assert torch.equal(candidate.token_ids, alone.token_ids)
    assert len({c.text for c in sampled}) == 3


def test_prompts_of_different_lengths_are_prefilled_once_each_and_decoded_together(tiny):
    tokenizer = tiny.tokenizer
    recording = RecordingLM(tiny.model)
    decoder = StructuredDecoder(recording, tokenizer, max_new_tokens=150, max_value_tokens=6)
    requests = [
        short_request(tokenizer, 0, 3, "A much longer request text that pads the other prompt on the left side."),
        short_request(tokenizer, 1, 3),
    ]
    lengths = [len(tokenizer.encode(r.prompt, add_special_tokens=False)) for r in requests]
    together = decoder.generate(requests, 2, greedy=True)
    prefills = [shape for shape in recording.shapes if shape[1] > 1]
    assert prefills == [(1, lengths[0]), (1, lengths[1])] and lengths[0] > lengths[1]
    assert all(shape == (4, 1) for shape in recording.shapes[2:])
    for request, group in zip(requests, together):
        (alone,) = decoder.generate([request], 1, greedy=True)
        for candidate in group:
            assert torch.equal(candidate.token_ids, alone[0].token_ids)


def test_sampling_with_a_generator_is_reproducible(tiny):
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, max_new_tokens=120, max_value_tokens=4)
    request = short_request(tiny.tokenizer, 0, 3)
    runs = [decoder.generate([request], 3, generator=torch.Generator().manual_seed(5))[0] for _ in range(2)]
    assert [c.text for c in runs[0]] == [c.text for c in runs[1]]
    other = decoder.generate([request], 3, generator=torch.Generator().manual_seed(6))[0]
    assert [c.text for c in other] != [c.text for c in runs[0]]


@pytest.mark.parametrize("agents, counts, seeds", [((1,), (3, 1), (11, 15)), ((1, 0), (1, 2, 2), (11, 12, 13))])
def test_random_streams_in_one_call_draw_what_separate_calls_draw(tiny, agents, counts, seeds):
    """Candidates split among (count, generator) streams are the candidates of one call per stream with that
    generator alone, and leave each generator in the state those calls leave it in, also where one stream's
    call would have stopped earlier than another's."""
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, max_new_tokens=200, max_value_tokens=8)
    batch = [short_request(tiny.tokenizer, agent, 3) for agent in agents]
    together = decoder.generate(
        batch, sum(counts), streams=[(c, torch.Generator().manual_seed(s)) for c, s in zip(counts, seeds)]
    )
    generators = [torch.Generator().manual_seed(s) for s in seeds]
    offset, steps = 0, []
    for count, generator in zip(counts, generators):
        alone = decoder.generate(batch, count, generator=generator)
        steps.append(decoder.last_decode_steps)
        for group, expected in zip(together, alone):
            assert [c.token_ids.tolist() for c in group[offset : offset + count]] == [
                c.token_ids.tolist() for c in expected
            ]
        offset += count
    if len(agents) == 1:
        assert len(set(steps)) > 1, "the streams' own calls should end at different steps"
    again = [torch.Generator().manual_seed(s) for s in seeds]
    decoder.generate(batch, sum(counts), streams=list(zip(counts, again)))
    for used, reference in zip(again, generators):
        assert torch.equal(used.get_state(), reference.get_state())
    assert len({c.text for c in together[0]}) > 1


def test_random_streams_are_validated(tiny):
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, max_new_tokens=120, max_value_tokens=4)
    request = short_request(tiny.tokenizer, 0, 3)
    with pytest.raises(ValueError, match=r"random streams of \[2, 2\] candidates"):
        decoder.generate([request], 3, streams=[(2, torch.Generator()), (2, torch.Generator())])
    with pytest.raises(ValueError, match="one of a generator"):
        decoder.generate([request], 2, generator=torch.Generator(), streams=[(2, torch.Generator())])


def test_fill_budget_mode_runs_to_the_token_budget(tiny):
    tokenizer = tiny.tokenizer
    budget = 160
    recording = RecordingLM(tiny.model)
    decoder = StructuredDecoder(recording, tokenizer, max_new_tokens=budget, fill_budget=True)
    (group,) = decoder.generate([short_request(tokenizer, 0, 3)], 2, seeds=[3])
    assert len(recording.shapes) == budget  # one prefill + budget - 1 decode steps
    plan = build_slot_plan(tokenizer, 0, 3)
    for candidate in group:
        assert_strict_action(candidate.text, 0, 3)
        assert len(candidate.token_ids) > budget - plan.longest_close
        # No voluntary close and no value cap: the first value runs until the budget reserve closes it.
        first_forced = int(torch.nonzero(~candidate.value_mask)[0])
        assert first_forced >= budget - plan.minimum_tokens - plan.longest_close


def test_requests_are_validated(tiny):
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, max_new_tokens=200)
    with pytest.raises(ValueError, match="must end with the assistant prefill"):
        decoder.generate([DecodeRequest("no prefill here", 0, 3)], 1)
    request = short_request(tiny.tokenizer, 1, 3)
    with pytest.raises(ValueError, match="either a generator or per-request seeds"):
        decoder.generate([request], 1, generator=torch.Generator(), seeds=[1])
    with pytest.raises(ValueError, match="num_candidates"):
        decoder.generate([request], 0)
    with pytest.raises(ValueError, match="max_value_tokens"):
        StructuredDecoder(tiny.model, tiny.tokenizer, max_value_tokens=0)
    with pytest.raises(ValueError, match="temperature"):
        StructuredDecoder(tiny.model, tiny.tokenizer, temperature=0.0)


def test_batched_prefill_fallback_matches_the_preallocated_cache(tiny, monkeypatch):
    """Caches that cannot be preallocated take one left-padded batch prefill; the greedy result is the same."""
    import travel.generation.decoder as decoder_module

    tokenizer = tiny.tokenizer
    decoder = StructuredDecoder(tiny.model, tokenizer, max_new_tokens=150, max_value_tokens=6)
    requests = [short_request(tokenizer, 0, 3, "a longer request, padded less"), short_request(tokenizer, 1, 3)]
    preallocated = decoder.generate(requests, 2, greedy=True)
    monkeypatch.setattr(decoder_module, "supports_preallocation", lambda cache: False)
    batched = decoder.generate(requests, 2, greedy=True)
    for group_a, group_b in zip(preallocated, batched):
        for a, b in zip(group_a, group_b):
            assert torch.equal(a.token_ids, b.token_ids)


def test_a_decoder_of_another_model_keeps_every_setting_but_the_budget_it_is_given(tiny):
    """`with_model` (a comparator's or the central teacher's decoder) copies each constructor parameter."""
    import inspect

    settings = {
        "max_new_tokens": 300, "max_value_tokens": 3, "temperature": 0.9, "top_p": 0.7, "fill_budget": True,
        "step_backend": "eager", "share_prompt_cache": "never", "values": "catalog", "compute_dtype": "bfloat16",
        "decode_weights": "copy", "jump_forced": True, "compile_decode": True, "compile_prefill": True,
        "prefix_attention": "joint_softmax", "decode_matmul": "cublas",
    }
    assert set(settings) == set(list(inspect.signature(StructuredDecoder.__init__).parameters)[3:])  # every one
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, **settings)
    copy = decoder.with_model(tiny.model, max_new_tokens=500)
    assert {name: getattr(copy, name) for name in settings} == {**settings, "max_new_tokens": 500}
    assert decoder.with_model(tiny.model).max_new_tokens == 300
