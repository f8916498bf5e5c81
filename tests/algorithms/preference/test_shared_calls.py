"""A current_copy comparator sampling in the target's decoder calls: the candidates and random streams of
separate calls, in fewer calls."""

import pytest
import torch

from bench.measure import DecoderCalls
from tests.fixtures import fixture_row
from travel.agents.layouts import build_layout
from travel.agents.models import build_tiny_random
from travel.algorithms.preference.collection import PolicySource, PreferenceSettings, collect_row_pairs
from travel.algorithms.preference.comparators import Comparator, ComparatorSpec
from travel.algorithms.preference.loop import comparator_source

HARDWARE = {"agent_devices": ["cpu", "cpu"], "parallel_training": "none"}
GENERATION = {"max_new_tokens": 400, "max_value_tokens": 3, "temperature": 1.0, "top_p": 1.0}


def collected(shared: bool, batch_size: int, counts: tuple[int, int]):
    """(target token ids, comparator token ids, rewards, decoder calls per policy, generator states after)."""
    layout = build_layout(build_tiny_random, HARDWARE, GENERATION, learning_rate=2e-5, seed=0)
    spec = ComparatorSpec(name="current_copy", policy="current_copy", devices=("cpu", "cpu"))
    comparator = Comparator(spec, seed=3, actor_devices=["cpu", "cpu"])
    row = fixture_row()
    with comparator.collection(1, [actor.model for actor in layout.actors]) as policies:
        target = PolicySource(layout, batch_size)
        source = comparator_source(layout, policies, batch_size)
        assert target.shares_calls_with(source)
        settings = PreferenceSettings(counts[0], counts[1], 6, "comparator_reward", shared_comparator_calls=shared)
        pools = {}
        original = PolicySource.joint_candidates

        def kept(self, row, per_policy):
            joint = original(self, row, per_policy)
            pools["target" if self is target else "comparator"] = [[s.ids for s in j.sequences] for j in joint]
            return joint

        PolicySource.joint_candidates = kept
        try:
            with DecoderCalls([layout.actors[0].decoder]) as first, DecoderCalls([layout.actors[1].decoder]) as second:
                _, target_rewards, comparator_rewards = collect_row_pairs(row, target, settings, comparator=source)
        finally:
            PolicySource.joint_candidates = original
    calls = [[call["candidates"] for call in recorder.calls] for recorder in (first, second)]
    streams = [actor.generator.get_state() for actor in layout.actors] + [comparator.stream.generator("cpu").get_state()]
    return pools["target"], pools["comparator"], (target_rewards, comparator_rewards), calls, streams


@pytest.mark.parametrize("batch_size, counts", [(3, (4, 2)), (20, (3, 4))])
def test_shared_calls_give_the_candidates_of_separate_calls(one_torch_thread, batch_size, counts):
    shared = collected(True, batch_size, counts)
    separate = collected(False, batch_size, counts)
    assert shared[0] == separate[0] and shared[1] == separate[1]
    assert shared[2] == separate[2]
    assert len(shared[0]) == counts[0] and len(shared[1]) == counts[1]
    assert len({str(ids) for ids in shared[0] + shared[1]}) > 1
    for after_shared, after_separate in zip(shared[4], separate[4]):
        assert torch.equal(after_shared, after_separate)
    # separate: the target's calls, then the comparator's; shared: call i holds both i-th generation batches
    chunks = [[min(batch_size, n - s) for s in range(0, n, batch_size)] for n in counts]
    merged = [sum(c[i] for c in chunks if i < len(c)) for i in range(max(map(len, chunks)))]
    assert separate[3] == [chunks[0] + chunks[1]] * 2
    assert shared[3] == [merged] * 2
