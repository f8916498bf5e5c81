"""Preference replay: exact token round trips, refused foreign records, lambda-decay sampling."""

import json
import random
from collections import Counter

import pytest

from travel.algorithms.preference.batch import (
    COMPARATOR,
    TARGET,
    CandidateRef,
    JointCandidate,
    PreferenceBatch,
    PreferencePair,
    TokenSequence,
)
from travel.algorithms.preference.replay import (
    ReplayError,
    ReplayStore,
    lambda_decay_weights,
    sample_replay,
)


def candidate(seed, policies=2):
    rng = random.Random(seed)
    sequences = []
    for _ in range(policies):
        n = rng.randint(1, 40)
        sequences.append(
            TokenSequence(
                tuple(rng.randrange(0, 151_936) for _ in range(n)), tuple(rng.randint(0, 1) for _ in range(n))
            )
        )
    return JointCandidate(texts=(f"logistics {seed} é", f"experience {seed}"), sequences=tuple(sequences))


def batch(num_pairs, tag=0, kind="decentralized", rows=(3, 8)):
    policies = 2 if kind == "decentralized" else 1
    pairs = tuple(
        PreferencePair(
            row_index=rows[i % len(rows)],
            winner_ref=CandidateRef(TARGET, i),
            loser_ref=CandidateRef(COMPARATOR, i),
            winner=candidate(1000 * tag + 2 * i, policies),
            loser=candidate(1000 * tag + 2 * i + 1, policies),
            winner_reward=0.5 + i / 100,
            loser_reward=-0.1,
            candidate_mean=0.2,
            iteration=tag,
        )
        for i in range(num_pairs)
    )
    prompts = {row: tuple(tuple(range(row, row + 5 + p)) for p in range(policies)) for row in rows}
    return PreferenceBatch(kind, pairs, prompts)


# ---- shards ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["decentralized", "centralized_joint"])
def test_shards_round_trip_tokens_masks_and_prompts_exactly(tmp_path, kind):
    store = ReplayStore(tmp_path / "preference_replay", kind)
    written = batch(7, tag=3, kind=kind)
    path = store.write(3, written)
    assert path.name == "iteration_0003.json"
    assert store.load(3) == written
    reopened = ReplayStore(tmp_path / "preference_replay", kind)
    assert reopened.reload() == [3] and reopened.shards == [written]
    raw = json.loads(path.read_text())
    assert raw["version"] == 1 and raw["kind"] == kind
    assert all(record["version"] == 1 and record["kind"] == kind for record in raw["pairs"])
    assert all(isinstance(i, int) for i in raw["pairs"][0]["winner"]["sequences"][0]["ids"])


def test_writes_are_atomic_and_leave_no_temporary_files(tmp_path):
    store = ReplayStore(tmp_path, "decentralized")
    store.write(1, batch(2))
    store.write(1, batch(4))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iteration_0001.json"]
    assert len(store.load(1)) == 4


def edit_shard(path, change):
    payload = json.loads(path.read_text())
    change(payload)
    path.write_text(json.dumps(payload))


def test_a_record_of_another_kind_is_refused(tmp_path):
    ReplayStore(tmp_path, "centralized_joint").write(1, batch(2, kind="centralized_joint"))
    with pytest.raises(ReplayError, match="'centralized_joint'.*expected 'decentralized'"):
        ReplayStore(tmp_path, "decentralized").load(1)
    store = ReplayStore(tmp_path, "decentralized")
    path = store.write(2, batch(3))
    edit_shard(path, lambda p: p["pairs"][1].update(kind="centralized_joint"))
    with pytest.raises(ReplayError, match=r"iteration_0002\.json, pair 1: a 'centralized_joint' record"):
        store.load(2)


def test_a_record_without_version_is_refused(tmp_path):
    store = ReplayStore(tmp_path, "decentralized")
    path = store.write(1, batch(3))
    edit_shard(path, lambda p: p["pairs"][2].pop("version"))
    with pytest.raises(ReplayError, match="pair 2: no replay version"):
        store.load(1)
    edit_shard(path, lambda p: p.pop("version"))
    with pytest.raises(ReplayError, match=r"iteration_0001\.json: no replay version"):
        store.load(1)


def test_corrupted_tokens_are_named(tmp_path):
    store = ReplayStore(tmp_path, "decentralized")
    path = store.write(1, batch(2))
    edit_shard(
        path,
        lambda p: p["pairs"][0]["loser"]["sequences"][1].update(
            mask=[2] * len(p["pairs"][0]["loser"]["sequences"][1]["ids"])
        ),
    )
    with pytest.raises(ReplayError, match="pair 0 loser, sequence 1: value mask entries must be 0 or 1"):
        store.load(1)


def test_a_store_refuses_pairs_of_another_kind(tmp_path):
    with pytest.raises(ReplayError, match="centralized_joint pairs in a decentralized"):
        ReplayStore(tmp_path, "decentralized").write(1, batch(1, kind="centralized_joint"))


# ---- sampling -------------------------------------------------------------------------------------


def test_lambda_decay_weights():
    weights = lambda_decay_weights(6, 0.8)
    # (1 - 0.8) 0.8^age / sum over six ages; the sum is 1 - 0.8^6 = 0.737856
    assert weights[0] == pytest.approx(0.2 / 0.737856) and round(weights[0], 3) == 0.271
    assert weights[5] == pytest.approx(0.2 * 0.8**5 / 0.737856)
    assert sum(weights) == pytest.approx(1.0)
    assert lambda_decay_weights(4, 1.0) == [0.25] * 4
    assert lambda_decay_weights(3, 0.0) == [1.0, 0.0, 0.0]
    with pytest.raises(ReplayError, match="preference_replay_lambda=1.5"):
        lambda_decay_weights(3, 1.5)


def shards_of(sizes):
    return [batch(n, tag=t + 1) for t, n in enumerate(sizes)]


def key(pair):
    return (pair.iteration, pair.winner_ref.index)


def test_sampling_is_deterministic_for_a_seed():
    shards = shards_of([5, 6, 7])
    first = sample_replay(shards, 12, random.Random(3), "lambda_decay", 0.8)
    again = sample_replay(shards, 12, random.Random(3), "lambda_decay", 0.8)
    other = sample_replay(shards, 12, random.Random(4), "lambda_decay", 0.8)
    assert [key(p) for p in first] == [key(p) for p in again]
    assert [key(p) for p in first] != [key(p) for p in other]


def test_draws_within_a_shard_are_without_replacement_then_cycle():
    # one shard: every record once before any repeats
    (shard,) = shards_of([5])
    drawn = sample_replay([shard], 12, random.Random(0), "lambda_decay", 0.8)
    counts = Counter(key(p) for p in drawn)
    assert sorted(counts.values()) == [2, 2, 2, 3, 3]
    # several shards: per shard, no record repeats before that shard's records are all drawn
    shards = shards_of([3, 4, 40])
    for seed in range(20):
        drawn = sample_replay(shards, 30, random.Random(seed), "lambda_decay", 0.8)
        for iteration, size in ((1, 3), (2, 4), (3, 40)):
            per_shard = Counter(key(p) for p in drawn if p.iteration == iteration)
            total = sum(per_shard.values())
            assert max(per_shard.values(), default=0) - min(per_shard.values(), default=0) <= 1
            assert len(per_shard) == min(total, size)


def test_shards_are_picked_by_their_lambda_decay_weight():
    shards = shards_of([50] * 6)
    drawn = sample_replay(shards, 20_000, random.Random(1), "lambda_decay", 0.8)
    share = Counter(p.iteration for p in drawn)
    weights = lambda_decay_weights(6, 0.8)  # newest first: iteration 6 has age 0
    for iteration in range(1, 7):
        assert share[iteration] / 20_000 == pytest.approx(weights[6 - iteration], abs=0.015)


def test_current_and_all_history_modes():
    shards = shards_of([4, 0, 6])
    current = sample_replay(shards, 6, random.Random(0), "current")
    assert {p.iteration for p in current} == {3} and len({key(p) for p in current}) == 6
    history = sample_replay(shards, 10, random.Random(0), "all_history")
    assert len({key(p) for p in history}) == 10  # uniform over all records, no repeats before all are drawn
    with pytest.raises(ReplayError, match="preference_replay_mode='nearest'"):
        sample_replay(shards, 3, random.Random(0), "nearest")
    with pytest.raises(ReplayError, match="preference_replay_lambda is required"):
        sample_replay(shards, 3, random.Random(0), "lambda_decay")


def test_sample_size_is_the_new_pairs_or_the_last_non_empty_shard(tmp_path):
    store = ReplayStore(tmp_path, "decentralized")
    store.write(1, batch(4, tag=1))
    store.write(2, batch(6, tag=2))
    store.write(3, PreferenceBatch("decentralized"))  # an all-tied iteration
    assert store.total_pairs == 10
    assert store.default_sample_size(0) == 6 and store.default_sample_size(5) == 5
    sample = store.sample(0, random.Random(0), "lambda_decay", 0.8)
    assert len(sample) == 6 and sample.kind == "decentralized"
    assert set(sample.prompts) == {p.row_index for p in sample}
    assert len(store.sample(3, random.Random(0), "lambda_decay", 0.8, size=9)) == 9
    empty = ReplayStore(tmp_path / "fresh", "decentralized").sample(0, random.Random(0), "lambda_decay", 0.8)
    assert len(empty) == 0


def test_a_joint_store_refuses_decentralized_records(tmp_path):
    ReplayStore(tmp_path, "decentralized").write(1, batch(2))
    with pytest.raises(ReplayError, match="'decentralized'.*expected 'centralized_joint'"):
        ReplayStore(tmp_path, "centralized_joint").load(1)
    joint = ReplayStore(tmp_path / "joint", "centralized_joint")
    with pytest.raises(ReplayError, match="cannot store decentralized pairs in a centralized_joint replay store"):
        joint.write(1, batch(2))
    path = joint.write(2, batch(2, kind="centralized_joint"))
    edit_shard(path, lambda p: p["pairs"][0].update(kind="decentralized"))
    with pytest.raises(ReplayError, match=r"iteration_0002\.json, pair 0: a 'decentralized' record"):
        joint.load(2)
