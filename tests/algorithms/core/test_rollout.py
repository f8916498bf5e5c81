"""The rollout seam: aligned pairing, the shared reward per joint action, env-step counting, checks."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from tests.fixtures import (
    all_dash_action_text,
    five_day_fixture_row,
    fixture_row,
    role_action_text,
    valid_plan_values,
)
from travel.algorithms.core.rollout import JointRolloutSampler


@dataclass(frozen=True)
class ScriptedCandidate:
    text: str
    token_ids: tuple[int, ...]
    value_mask: tuple[int, ...]


class ScriptedPolicy:
    """Returns the next scripted list of texts on every call; records the calling threads."""

    def __init__(self, agent_id: int, script: list[list[str]], mask_length: int = 3):
        self.agent_id = agent_id
        self.script = list(script)
        self.mask_length = mask_length
        self.threads: set[int] = set()
        self.calls: list[tuple[int, bool]] = []
        self.prompt_renders = 0
        self._prompts: dict[int, tuple[int, ...]] = {}

    def prompt_ids(self, row):
        if id(row) not in self._prompts:
            self.prompt_renders += 1
            self._prompts[id(row)] = (100 + self.agent_id, row.days)
        return self._prompts[id(row)]

    def sample(self, row, num_candidates, *, greedy=False):
        self.threads.add(threading.get_ident())
        self.calls.append((num_candidates, greedy))
        texts = self.script.pop(0)
        return [
            ScriptedCandidate(text, tuple(range(k, k + self.mask_length)), (0, 1, 1)[: self.mask_length])
            for k, text in enumerate(texts)
        ]


@pytest.fixture(scope="module")
def row():
    return fixture_row()


def texts(row):
    plan = valid_plan_values(row)
    valid = [role_action_text(agent, plan, row.days) for agent in (0, 1)]
    dash = [all_dash_action_text(agent, row.days) for agent in (0, 1)]
    return valid, dash


def test_candidates_pair_by_index_and_share_one_reward(row):
    valid, dash = texts(row)
    # joint 0: both valid (docs/reward.md "Reference values": a strict, grounded, constraint-valid plan scores 1.00);
    # joint 1: both all-dash (docs/reward.md "Reference values": a strict all-dash joint action scores exactly 0.08);
    # joint 2: valid logistics with dash experience - neither of the above.
    policies = [
        ScriptedPolicy(0, [[valid[0], dash[0], valid[0]]]),
        ScriptedPolicy(1, [[valid[1], dash[1], dash[1]]]),
    ]
    sampler = JointRolloutSampler(policies)
    rollout = sampler.rollout(row, 3)
    assert rollout.rewards[0] == pytest.approx(1.0)
    assert rollout.rewards[1] == pytest.approx(0.08)
    assert 0.08 < rollout.rewards[2] < 1.0
    assert rollout.joint_texts(2) == (valid[0], dash[1])
    assert rollout.metrics[0]["team_action_success"] == 1.0 and rollout.metrics[1]["required_grounded_recall"] == 0.0
    assert [agent.agent_id for agent in rollout.agents] == [0, 1]
    assert rollout.agents[0].prompt_ids == (100, 3) and rollout.agents[1].prompt_ids == (101, 3)
    assert rollout.agents[1].candidates[0].value_mask == (0, 1, 1)


def test_training_rollouts_count_k_env_steps_and_evaluation_none(row):
    valid, dash = texts(row)
    script = [[valid[0], dash[0]]] * 3
    policies = [ScriptedPolicy(0, script), ScriptedPolicy(1, [[valid[1], dash[1]]] * 3)]
    sampler = JointRolloutSampler(policies)
    assert sampler.rollout(row, 2).env_step == 2
    assert sampler.rollout(row, 2).env_step == 4  # two agents do not double the count
    evaluation = sampler.rollout(row, 2, greedy=True, count_env_steps=False)
    assert evaluation.env_step == 4 and sampler.env_step == 4
    assert policies[0].calls == [(2, False), (2, False), (2, True)]
    assert policies[0].prompt_renders == 1  # the prompt is rendered once per row


def test_score_function_sees_all_k_pairs_in_one_call(row):
    calls = []

    class Result:
        def __init__(self, reward):
            self.reward, self.metrics = reward, {}

    def score(row_, pairs, config):
        calls.append((row_, list(pairs), config))
        return [Result(float(i)) for i, _ in enumerate(pairs)]

    policies = [ScriptedPolicy(0, [["a0", "a1"]]), ScriptedPolicy(1, [["b0", "b1"]])]
    rollout = JointRolloutSampler(policies, "cfg", score=score).rollout(row, 2)
    assert calls == [(row, [("a0", "b0"), ("a1", "b1")], "cfg")]
    assert rollout.rewards == [0.0, 1.0]


def test_parallel_sampling_uses_one_thread_per_agent_and_gives_the_same_result(row):
    valid, dash = texts(row)
    make = lambda: [ScriptedPolicy(0, [[valid[0], dash[0]]]), ScriptedPolicy(1, [[dash[1], valid[1]]])]
    sequential = JointRolloutSampler(make()).rollout(row, 2)
    policies = make()
    sampler = JointRolloutSampler(policies, parallel=True)
    try:
        parallel = sampler.rollout(row, 2)
    finally:
        sampler.close()
    assert parallel.rewards == sequential.rewards
    main = threading.get_ident()
    (thread0,), (thread1,) = policies[0].threads, policies[1].threads
    assert len({thread0, thread1, main}) == 3


def test_a_policy_returning_the_wrong_number_of_candidates_is_named(row):
    policies = [ScriptedPolicy(0, [["a"]]), ScriptedPolicy(1, [["b", "c"]])]
    with pytest.raises(RuntimeError, match=r"agent 0 returned 1 candidates for row .*expected 2"):
        JointRolloutSampler(policies).rollout(row, 2)


def test_a_mask_that_does_not_match_the_tokens_is_rejected(row):
    bad = ScriptedPolicy(1, [["b", "c"]])
    bad.sample = lambda row, k, greedy=False: [ScriptedCandidate("b", (1, 2), (1,)), ScriptedCandidate("c", (1,), (1,))]
    with pytest.raises(RuntimeError, match="agent 1.*candidate 0: value mask has 1 entries for 2 tokens"):
        JointRolloutSampler([ScriptedPolicy(0, [["a", "d"]]), bad]).rollout(row, 2)


def test_policies_must_be_two_in_agent_order():
    with pytest.raises(ValueError, match="exactly two policies"):
        JointRolloutSampler([ScriptedPolicy(0, [])])
    with pytest.raises(ValueError, match="agent order"):
        JointRolloutSampler([ScriptedPolicy(1, []), ScriptedPolicy(0, [])])


class BatchingPolicy(ScriptedPolicy):
    """Scripted texts per row, sampled several rows per call; records each call's row count."""

    def __init__(self, agent_id, texts_by_day):
        super().__init__(agent_id, [])
        self.texts_by_day = texts_by_day
        self.call_sizes = []

    def sample(self, row, num_candidates, *, greedy=False):
        self.script = [self.texts_by_day[row.days][:num_candidates]]
        return super().sample(row, num_candidates, greedy=greedy)

    def sample_rows(self, rows, num_candidates, *, greedy=False):
        self.call_sizes.append(len(rows))
        return [self.sample(row, num_candidates, greedy=greedy) for row in rows]


def test_rows_are_sampled_together_in_calls_of_rows_per_call():
    rows = [fixture_row(), five_day_fixture_row(), fixture_row()]
    by_day = {}
    for day_row in rows[:2]:
        valid, dash = texts(day_row)
        by_day.setdefault(day_row.days, (valid, dash))

    def make():
        return [
            BatchingPolicy(agent, {days: [valid[agent], dash[agent]] for days, (valid, dash) in by_day.items()})
            for agent in (0, 1)
        ]

    policies = make()
    batched = JointRolloutSampler(policies, rows_per_call=2).rollouts(rows, 2)
    assert [policy.call_sizes for policy in policies] == [[2, 1], [2, 1]]
    assert [rollout.env_step for rollout in batched] == [2, 4, 6]  # as if the rows ran one by one
    one_by_one = JointRolloutSampler(make())
    for row_, rollout in zip(rows, batched):
        alone = one_by_one.rollout(row_, 2)
        assert rollout.row is row_ and rollout.rewards == alone.rewards == [1.0, pytest.approx(0.08)]
        assert [agent.texts for agent in rollout.agents] == [agent.texts for agent in alone.agents]
    whole = make()
    evaluation = JointRolloutSampler(whole).rollouts(rows, 1, greedy=True, count_env_steps=False)
    assert [policy.call_sizes for policy in whole] == [[3], [3]] and [r.env_step for r in evaluation] == [0, 0, 0]


def test_rows_per_call_must_be_positive(row):
    with pytest.raises(ValueError, match="generation.rows_per_call=0"):
        JointRolloutSampler([ScriptedPolicy(0, []), ScriptedPolicy(1, [])], rows_per_call=0)
