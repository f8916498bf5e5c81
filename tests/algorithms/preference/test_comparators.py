"""Comparators: current_copy reuses or freezes the actors, history1 is the previous iteration's end
checkpoint, a model comparator must share the actors' vocabulary, weights are shared and released."""

import gc
import weakref
from types import SimpleNamespace

import pytest
import torch

from travel.agents.models import build_tiny_random
from travel.algorithms.preference.comparators import (
    Comparator,
    ComparatorConfigError,
    ComparatorRolePolicy,
    ComparatorSpec,
    PolicyCheckpoints,
    RngStream,
    comparator_seed,
    same_weights,
)
from travel.algorithms.preference.loop import comparator_source


@pytest.fixture(scope="module")
def tiny():
    """Two tiny random Qwen3 actors with different weights, and their tokenizer."""
    first, second = build_tiny_random(seed=0), build_tiny_random(seed=1)
    return [first.model, second.model], first.tokenizer


def spec(policy, devices=("cpu", "cpu"), **extra):
    return ComparatorSpec(name=extra.pop("name", policy), policy=policy, devices=devices, **extra)


def snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def train_step(models, amount):
    """Stands in for an iteration's updates: every actor's weights change."""
    with torch.no_grad():
        for model in models:
            for parameter in model.parameters():
                parameter.add_(amount)


def test_history1_is_the_previous_iterations_end_checkpoint_not_one_older(tmp_path):
    actors = [build_tiny_random(seed=0).model, build_tiny_random(seed=1).model]
    comparator = Comparator(
        spec("history", history_k=1), seed=42, actor_devices=["cpu", "cpu"], checkpoint_dir=tmp_path
    )
    comparator.start(actors)
    ends = {0: [snapshot(m) for m in actors]}
    for iteration in (1, 2, 3):
        with comparator.collection(iteration, actors) as policies:
            assert policies.label == f"history1:{PolicyCheckpoints.label(iteration - 1)}"
            for agent in range(2):
                used = policies.models[agent].state_dict()
                assert same_weights(used, ends[iteration - 1][agent])
                if iteration >= 2:
                    assert not same_weights(used, ends[iteration - 2][agent])  # not one iteration staler
                assert policies.models[agent] is not actors[agent]
                assert not any(p.requires_grad for p in policies.models[agent].parameters())
        train_step(actors, 0.01 * iteration)
        comparator.end_iteration(iteration, actors)
        ends[iteration] = [snapshot(m) for m in actors]
    # only the checkpoint the next iteration can ask for is kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iteration_0003"]


def test_history_k_reaches_back_k_iterations_and_starts_from_the_initial_weights(tmp_path):
    checkpoints = PolicyCheckpoints(tmp_path, history_k=2)
    assert [checkpoints.source_iteration(t) for t in (1, 2, 3, 4)] == [0, 0, 1, 2]
    models = [torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)]
    for iteration in range(3):
        checkpoints.save(iteration, models)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iteration_0001", "iteration_0002"]
    with pytest.raises(FileNotFoundError, match="initial"):
        checkpoints.load(0, 0)


def test_current_copy_on_the_actors_device_reuses_the_live_weights(tiny):
    actors, _ = tiny
    comparator = Comparator(spec("current_copy"), seed=42, actor_devices=["cpu", "cpu"])
    with comparator.collection(1, actors) as policies:
        assert policies.models[0] is actors[0] and policies.models[1] is actors[1]


def test_current_copy_on_another_device_is_a_frozen_copy_shared_when_weights_are_identical(tiny):
    actors, _ = tiny
    # the actors are declared on another device, so the comparator device "cpu" needs copies
    comparator = Comparator(spec("current_copy"), seed=42, actor_devices=["cuda:0", "cuda:0"])
    with comparator.collection(1, actors) as policies:
        assert not policies.shared  # the two actors' weights differ
        for agent in range(2):
            assert policies.models[agent] is not actors[agent]
            assert same_weights(policies.models[agent].state_dict(), actors[agent].state_dict())
            assert not any(p.requires_grad for p in policies.models[agent].parameters())
        copy = weakref.ref(policies.models[0])
    del policies
    gc.collect()
    assert copy() is None  # released when the collection phase ended
    twins = [build_tiny_random(seed=5).model, build_tiny_random(seed=5).model]
    with comparator.collection(2, twins) as policies:
        assert policies.shared  # identical frozen weights on one device are loaded once


def test_the_comparator_stream_is_independent_and_persistent():
    assert comparator_seed(42) == -42 and comparator_seed(0) == 1
    torch.manual_seed(7)
    expected_global = torch.rand(3)
    torch.manual_seed(7)
    stream = RngStream(comparator_seed(7))
    first = torch.rand(3, generator=stream.generator("cpu"))
    second = torch.rand(3, generator=stream.generator("cpu"))
    assert torch.equal(torch.rand(3), expected_global)  # the global stream did not move
    assert not torch.equal(first, second)  # the stream advances between calls
    replay = RngStream(comparator_seed(7)).generator("cpu")
    assert torch.equal(torch.rand(3, generator=replay), first)


class FakeTokenizer:
    def __init__(self, vocab):
        self.vocab = dict(vocab)

    def get_vocab(self):
        return dict(self.vocab)


def test_a_model_comparator_with_another_vocabulary_fails_before_generating(tiny):
    actors, tokenizer = tiny
    other = FakeTokenizer({**tokenizer.get_vocab(), "<extra>": len(tokenizer.get_vocab())})
    loads = []
    comparator = Comparator(
        spec("model", model_name="org/other-vocab"),
        seed=1,
        actor_devices=["cpu", "cpu"],
        load_tokenizer=lambda name: other,
        load_model=lambda name, device: loads.append(name),
    )
    with pytest.raises(ComparatorConfigError, match="comparator_model_name=org/other-vocab.*vocabulary differs"):
        with comparator.collection(1, actors, [tokenizer, tokenizer]):
            pytest.fail("the comparator must not be usable")
    assert loads == []  # refused before any weights were loaded
    # without a separate tokenizer loader the loaded model's tokenizer is checked, still before sampling
    late = Comparator(
        spec("model", model_name="org/other-vocab"),
        seed=1,
        actor_devices=["cpu", "cpu"],
        load_model=lambda name, device: (build_tiny_random(seed=3).model, other),
    )
    with pytest.raises(ComparatorConfigError, match="org/other-vocab"):
        with late.collection(1, actors, [tokenizer, tokenizer]):
            pytest.fail("the comparator must not be usable")


def test_a_model_comparator_loads_once_per_device_and_both_roles_share_it(tiny):
    actors, tokenizer = tiny
    loads = []

    def load(name, device):
        loads.append((name, device))
        return build_tiny_random(seed=9).model, tokenizer

    comparator = Comparator(
        spec("model", model_name="org/same-vocab"), seed=1, actor_devices=["cpu", "cpu"], load_model=load
    )
    with comparator.collection(1, actors, [tokenizer, tokenizer]) as policies:
        assert policies.shared and policies.label == "org/same-vocab"
        assert not any(p.requires_grad for p in policies.models[0].parameters())
    assert loads == [("org/same-vocab", "cpu")]


class RecordingDecoder:
    def __init__(self):
        self.calls = []

    def generate(self, requests, num_candidates, greedy=False, generator=None):
        self.calls.append((requests, num_candidates, generator))
        return [[SimpleNamespace(text="t", token_ids=[1, 2], value_mask=[1, 1]) for _ in range(num_candidates)]]


def test_comparator_role_policies_sample_with_the_comparator_stream_under_the_actor_prompt(tiny):
    models, tokenizer = tiny
    decoders = [RecordingDecoder(), RecordingDecoder()]
    actors = [
        SimpleNamespace(
            agent_id=i,
            model=models[i],
            tokenizer=tokenizer,
            decoder=decoders[i],
            request=lambda row, i=i: f"request {i}",
            prompt_ids=lambda row, i=i: [i, 9],
        )
        for i in range(2)
    ]
    comparator = Comparator(spec("current_copy"), seed=3, actor_devices=["cpu", "cpu"])
    with comparator.collection(1, models) as policies:
        source = comparator_source(actors, policies, batch_size=2)
        row = SimpleNamespace(source_index=0)
        candidates = source.sample(row, 3)
    assert len(candidates) == 3 and source.prompt_ids(row) == ((0, 9), (1, 9))
    stream = comparator.stream.generator("cpu")
    for agent, decoder in enumerate(decoders):
        assert [(r, n) for r, n, _ in decoder.calls] == [([f"request {agent}"], 2), ([f"request {agent}"], 1)]
        assert all(generator is stream for _, _, generator in decoder.calls)
    with pytest.raises(ValueError, match="never greedy"):
        ComparatorRolePolicy(actors[0], models[0], stream).sample(None, 1, greedy=True)


def test_a_frozen_model_gets_its_own_decoder_with_the_actor_settings(tiny):
    models, tokenizer = tiny
    from travel.generation import StructuredDecoder

    settings = StructuredDecoder(models[1], tokenizer, max_new_tokens=300, max_value_tokens=7, temperature=0.9,
                                 top_p=0.95, values="catalog", compute_dtype="bfloat16")
    actor = SimpleNamespace(agent_id=1, model=models[1], tokenizer=tokenizer, decoder=settings)
    policy = ComparatorRolePolicy(actor, models[0], None)
    assert policy.decoder.model is models[0] and policy.decoder.tokenizer is tokenizer
    assert (policy.decoder.max_new_tokens, policy.decoder.max_value_tokens, policy.decoder.top_p) == (300, 7, 0.95)
    assert (policy.decoder.values, policy.decoder.compute_dtype) == ("catalog", "bfloat16")
    assert ComparatorRolePolicy(actor, models[1], None).decoder is settings  # the actor's own weights


class RecordingStructuredDecoder:
    """A real structured decoder that records each call's requests, candidate count and output budget."""

    def __init__(self, decoder, calls):
        self.decoder, self.calls = decoder, calls

    def __getattr__(self, name):
        return getattr(self.decoder, name)

    def with_model(self, model, max_new_tokens=None):
        return RecordingStructuredDecoder(self.decoder.with_model(model, max_new_tokens), self.calls)

    def generate(self, requests, num_candidates, greedy=False, generator=None):
        groups = self.decoder.generate(requests, num_candidates, greedy=greedy, generator=generator)
        self.calls.append((list(requests), num_candidates, self.decoder.max_new_tokens, generator, groups))
        return groups


def test_the_central_teacher_writes_each_joint_candidate_in_one_call_under_the_pooled_budget(tiny):
    from tests.fixtures import fixture_row
    from travel.generation import StructuredDecoder
    from travel.task.fields import JOINT_ACTION
    from travel.task.joint_action import split_joint_action
    from travel.task.joint_prompt import build_joint_prompt
    from travel.task.roles import assistant_prefill

    models, tokenizer = tiny
    calls = []
    actors = [
        SimpleNamespace(
            agent_id=i,
            model=models[i],
            tokenizer=tokenizer,
            decoder=RecordingStructuredDecoder(
                StructuredDecoder(models[i], tokenizer, max_new_tokens=320 + 10 * i, max_value_tokens=6), calls
            ),
            prompt_ids=lambda row, i=i: [i, 5],
        )
        for i in range(2)
    ]
    central = ComparatorSpec("current_copy", "current_copy", "centralized", devices=("cpu", "cpu"))
    comparator = Comparator(central, seed=3, actor_devices=["cpu", "cpu"])
    row = fixture_row()
    with comparator.collection(1, models) as policies:
        source = comparator_source(actors, policies, batch_size=2, spec=central)
        joint = source.sample(row, 3)
    assert source.prompt_ids(row) == ((0, 5), (1, 5))  # projections train under the actors' own prompts
    # one decoder call per generation chunk, each of its draws one whole joint candidate, under 320 + 330 tokens
    assert [(len(requests), n, budget) for requests, n, budget, _, _ in calls] == [(1, 2, 650), (1, 1, 650)]
    assert all(generator is comparator.stream.generator("cpu") for *_, generator, _ in calls)
    request = calls[0][0][0]
    assert request.agent_id == JOINT_ACTION and request.prompt.endswith(assistant_prefill(JOINT_ACTION))
    assert build_joint_prompt(row).user in request.prompt  # both role contexts in one prompt
    assert len(joint) == 3
    for candidate in joint:
        for agent, (text, sequence) in enumerate(zip(candidate.texts, candidate.sequences)):
            prefill = assistant_prefill(agent)
            assert text.startswith(prefill)
            # the projection decodes back to the role action after the actor's own prefill
            assert tokenizer.decode(list(sequence.ids), clean_up_tokenization_spaces=False) == text[len(prefill):]
            assert 0 < sum(sequence.mask) < len(sequence.mask)
    # the role texts are the split of the teacher's joint outputs, each within the pooled budget
    outputs = [output for *_, (group,) in calls for output in group]
    assert [c.texts for c in joint] == [split_joint_action(output.text) for output in outputs]
    assert all(len(output.token_ids) <= 650 for output in outputs)
