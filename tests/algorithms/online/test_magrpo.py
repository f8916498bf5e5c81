"""MAGRPO: group advantages, the masked value-token update, the buffered loop, actors and devices."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import torch

from travel.agents.actors import Actor
from travel.agents.layouts import build_layout
from travel.agents.layouts import DecentralizedLayout
from travel.agents.devices import DeviceError, agent_devices
from travel.algorithms.online.magrpo import BufferSample, MAGRPOConfig, MAGRPOTrainer, group_advantages, value_loss_step
from travel.algorithms.core.results import BudgetDrift
from travel.algorithms.core.rollout import JointRolloutSampler
from travel.algorithms.core.schedule import Phase, TrainingSchedule

# ---- group advantages -------------------------------------------------------------------------------------


def test_mean_advantage_is_reward_minus_group_mean():
    assert group_advantages([0.2, 0.6, 0.1, 0.3]) == pytest.approx([-0.1, 0.3, -0.2, 0.0])


def test_other_advantage_modes():
    rewards = [1.0, 2.0, 4.0]
    assert group_advantages(rewards, "raw") == [1.0, 2.0, 4.0]
    assert group_advantages(rewards, "max") == [-3.0, -2.0, 0.0]
    # leave-one-out: 1 - (2+4)/2, 2 - (1+4)/2, 4 - (1+2)/2
    assert group_advantages(rewards, "rloo") == pytest.approx([-2.0, -0.5, 2.5])


def test_normalised_advantages_divide_by_the_population_std():
    # rewards 0 and 1: mean 0.5, population std 0.5 -> advantages -1 and 1
    assert group_advantages([0.0, 1.0], "mean", normalize=True) == pytest.approx([-1.0, 1.0])
    # equal rewards: std floored, advantages stay 0 instead of exploding
    assert group_advantages([0.3, 0.3], "mean", normalize=True) == [0.0, 0.0]


def test_unknown_advantage_mode_is_named():
    with pytest.raises(ValueError, match="algorithm.advantage_mode='median'"):
        group_advantages([0.0, 1.0], "median")


# ---- the value-token update ---------------------------------------------------------------------------------


class PositionalLM(torch.nn.Module):
    """A causal-LM stand-in whose logits at position t are a learnable row table[t], so the gradient of
    row t says exactly whether the token predicted at t entered the loss. Like a real LM it reads the
    positions from `position_ids` when given (a packed sequence restarts them per completion)."""

    def __init__(self, length: int = 24, vocab: int = 12, seed: int = 0):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.table = torch.nn.Parameter(torch.randn(length, vocab, generator=generator))

    def forward(self, input_ids, attention_mask=None, use_cache=None, position_ids=None, **kwargs):
        batch, width = input_ids.shape
        if position_ids is None:
            position_ids = torch.arange(width).expand(batch, width)
        return SimpleNamespace(logits=self.table[position_ids])


class RecordingSGD(torch.optim.SGD):
    def step(self, closure=None):
        self.recorded = [None if p.grad is None else p.grad.clone() for p in self.param_groups[0]["params"]]
        return super().step(closure)


@dataclass(frozen=True)
class Candidate:
    text: str
    token_ids: tuple[int, ...]
    value_mask: tuple[int, ...]


def make_actor(agent_id=0, seed=0, optimizer=RecordingSGD, lr=0.5):
    model = PositionalLM(seed=seed)
    return Actor(agent_id, model, SimpleNamespace(pad_token_id=0), optimizer(model.parameters(), lr=lr), torch.device("cpu"), None)


PROMPT = (1, 2, 3)  # P = 3: completion token i is predicted at position P - 1 + i = 2 + i


def expected_table_gradient(table, samples):
    """docs/algorithms.md "Value-token loss" written out: per prompt, mean over candidates with a value token of
    -(mean log-softmax of the masked tokens) x advantage; averaged over prompts."""
    table = table.detach().clone().requires_grad_(True)
    total = 0.0
    for sample in samples:
        terms = []
        for candidate, advantage in zip(sample.candidates, sample.advantages):
            picked = [(2 + i, tok) for i, (tok, m) in enumerate(zip(candidate.token_ids, candidate.value_mask)) if m]
            if not picked:
                continue
            logp = torch.stack([torch.log_softmax(table[row], dim=-1)[tok] for row, tok in picked]).mean()
            terms.append(-logp * advantage)
        total = total + torch.stack(terms).mean() / len(samples)
    total.backward()
    return table.grad


def sample_of(candidates, rewards):
    return BufferSample(PROMPT, tuple(candidates), tuple(group_advantages(rewards)), sum(rewards) / len(rewards), 0)


def test_masked_tokens_get_no_gradient_and_the_final_value_token_does():
    actor = make_actor()
    first = Candidate("a", (4, 5, 6, 7, 8), (0, 1, 1, 0, 1))  # the final token is a value token
    second = Candidate("b", (9, 5, 6, 7, 10), (0, 1, 0, 0, 1))
    samples = [sample_of([first, second], [0.2, 0.6])]
    assert samples[0].advantages == pytest.approx((-0.2, 0.2))
    expected = expected_table_gradient(actor.model.table, samples)
    value_loss_step(actor, samples)
    (grad,) = actor.optimizer.recorded
    assert torch.allclose(grad, expected, atol=1e-6)
    nonzero_rows = {row for row in range(grad.shape[0]) if grad[row].abs().sum() > 0}
    # value tokens at completion positions 1, 2, 4 -> rows 3, 4, 6; the final token (row 6) included;
    # forced tokens (rows 2, 5), prompt positions and padding rows get nothing
    assert nonzero_rows == {3, 4, 6}


def test_zero_advantage_candidates_still_count_in_the_mean_and_empty_masks_do_not():
    actor = make_actor()
    candidates = [
        Candidate("a", (4, 5), (1, 1)),
        Candidate("b", (6, 7), (1, 1)),  # the middle reward: advantage 0
        Candidate("c", (8, 9), (0, 0)),  # no value token: not a scored sequence
        Candidate("d", (10, 11), (1, 1)),
    ]
    samples = [sample_of(candidates, [0.1, 0.3, 0.3, 0.5]), sample_of(candidates[:2], [0.9, 0.9])]
    expected = expected_table_gradient(actor.model.table, samples)
    step = value_loss_step(actor, samples)
    assert torch.allclose(actor.optimizer.recorded[0], expected, atol=1e-6)
    assert step.grad_norm == pytest.approx(float(expected.norm()), rel=1e-5)  # logged as train/grad_norm_agent_*


def test_an_update_raises_the_likelihood_of_the_better_candidate():
    actor = make_actor(lr=0.5)
    better, worse = Candidate("a", (4, 5), (1, 1)), Candidate("b", (6, 7), (1, 1))

    def logp(candidate):
        with torch.no_grad():
            rows = torch.log_softmax(actor.model.table, dim=-1)
            return sum(rows[2 + i, tok].item() for i, tok in enumerate(candidate.token_ids))

    before = logp(better), logp(worse)
    value_loss_step(actor, [sample_of([better, worse], [1.0, 0.0])])
    assert logp(better) > before[0] and logp(worse) < before[1]


def test_a_non_finite_loss_moves_no_parameter():
    actor = make_actor()
    with torch.no_grad():
        actor.model.table[3] = float("nan")
    before = actor.model.table.detach().clone()
    value_loss_step(actor, [sample_of([Candidate("a", (4, 5), (1, 1)), Candidate("b", (6, 7), (1, 1))], [0.0, 1.0])])
    assert torch.equal(torch.isnan(actor.model.table), torch.isnan(before))
    finite = ~torch.isnan(before)
    assert torch.equal(actor.model.table.detach()[finite], before[finite])


# ---- the loop over a scripted schedule -----------------------------------------------------------------------


class ScriptedPolicy:
    def __init__(self, agent_id):
        self.agent_id = agent_id

    def prompt_ids(self, row):
        return PROMPT

    def sample(self, row, num_candidates, *, greedy=False):
        base = 4 + self.agent_id * 4
        return [Candidate(f"{self.agent_id}-{k}", (base + k, base + k + 1), (1, 1)) for k in range(num_candidates)]


def scripted_score(row, pairs, config):
    """Row i's joint actions get rewards 0.1 i and 0.1 i + 0.4."""
    return [SimpleNamespace(reward=0.1 * row.source_index + 0.4 * k, metrics={}) for k in range(len(pairs))]


class FakeEvaluator:
    def __init__(self):
        self.history = []

    def periodic(self, env_step):
        self.history.append(SimpleNamespace(env_step=env_step, terminal=False))

    def terminal(self, env_step, run_dir=None):
        self.history.append(SimpleNamespace(env_step=env_step, terminal=True))


class RecordingTracker:
    def __init__(self):
        self.records = []

    def log(self, metrics, *, env_step, upload=True):
        self.records.append((env_step, dict(metrics)))


class RecordingTrainer(MAGRPOTrainer):
    def _agent_samples(self, agent_id):
        samples = super()._agent_samples(agent_id)
        self.seen = getattr(self, "seen", []) + [(agent_id, samples)]
        return samples


@pytest.fixture
def scripted_run():
    rows = [SimpleNamespace(source_index=i) for i in range(3)]
    schedule = TrainingSchedule((Phase("short", tuple(rows[:2]), 1), Phase("full", tuple(rows), 2)), 2, 2)
    actors = DecentralizedLayout([make_actor(0, seed=0, optimizer=torch.optim.AdamW, lr=0.05),
                         make_actor(1, seed=1, optimizer=torch.optim.AdamW, lr=0.05)])
    sampler = JointRolloutSampler([ScriptedPolicy(0), ScriptedPolicy(1)], score=scripted_score)
    tracker, evaluator = RecordingTracker(), FakeEvaluator()
    trainer = RecordingTrainer(
        algorithm=MAGRPOConfig(logging_steps=5), schedule=schedule, sampler=sampler, actors=actors, evaluator=evaluator,
        tracker=tracker, progress=False,
    )
    return SimpleNamespace(trainer=trainer, actors=actors, tracker=tracker, schedule=schedule)


def test_scripted_rewards_train_both_actors_on_the_schedule(scripted_run):
    before = [actor.model.table.detach().clone() for actor in scripted_run.actors]
    result = scripted_run.trainer.train()
    for actor, initial in zip(scripted_run.actors, before):
        assert not torch.equal(actor.model.table.detach(), initial)
    # epochs: [r0 r1] | [r0 r1] [r2] | [r0 r1] [r2] with K = 2: buffers end at env steps 4, 8, 10, 14, 16
    assert result.env_steps == 16 and result.optimizer_updates == [5, 5]
    assert result.eval_env_steps == [0, 4, 10, 16] == scripted_run.schedule.eval_env_steps()
    train = [(step, m) for step, m in scripted_run.tracker.records if "train/reward" in m]
    assert [step for step, _ in train] == [4, 8, 10, 14, 16]
    # every sample's advantages are its rewards minus their mean: (0.1 i, 0.1 i + 0.4) -> (-0.2, +0.2)
    for agent_id, samples in scripted_run.trainer.seen:
        for sample in samples:
            assert sample.advantages == pytest.approx((-0.2, 0.2))
    assert {agent_id for agent_id, _ in scripted_run.trainer.seen} == {0, 1}


def test_turn_metrics_are_logged_once_per_joint_step_every_logging_steps(scripted_run):
    scripted_run.trainer.train()
    turns = [(step, m) for step, m in scripted_run.tracker.records if "turn_1/reward_mean" in m]
    # first buffer logs (4); then at least 5 env steps later: 10 (not 8), 16 (not 14)
    assert [step for step, _ in turns] == [4, 10, 16]
    step, first = turns[0]
    # rows 0 and 1: rewards (0, 0.4) and (0.1, 0.5)
    assert first["turn_1/reward_mean"] == pytest.approx(0.25) and first["turn_1/expected_return"] == pytest.approx(0.25)
    assert all(set(m) & {"turn_1/reward_mean"} for _, m in turns)


class BatchingPolicy(ScriptedPolicy):
    """Samples several rows per call, and records how many."""

    def __init__(self, agent_id):
        super().__init__(agent_id)
        self.call_rows = []

    def sample_rows(self, rows, num_candidates, *, greedy=False):
        self.call_rows.append([row.source_index for row in rows])
        return [self.sample(row, num_candidates, greedy=greedy) for row in rows]


def test_each_buffer_is_sampled_in_one_call_per_agent(scripted_run):
    policies = [BatchingPolicy(0), BatchingPolicy(1)]
    trainer = scripted_run.trainer
    trainer.sampler = JointRolloutSampler(policies, score=scripted_score)
    result = trainer.train()
    # buffers of 2 rows within each epoch: [r0 r1] | [r0 r1] [r2] | [r0 r1] [r2]
    for policy in policies:
        assert policy.call_rows == [[0, 1], [0, 1], [2], [0, 1], [2]]
    assert result.env_steps == 16 and result.optimizer_updates == [5, 5]
    train = [step for step, m in scripted_run.tracker.records if "train/reward" in m]
    assert train == [4, 8, 10, 14, 16]


def test_counts_that_drift_from_the_schedule_fail(scripted_run):
    trainer = scripted_run.trainer
    result = trainer.train()
    trainer.schedule = TrainingSchedule(trainer.schedule.phases, 2, 1)  # would predict 8 updates, not 5
    with pytest.raises(BudgetDrift, match="the schedule predicts"):
        trainer._check_against_schedule(result)


# ---- actors: placement, offload, parallel updates ---------------------------------------------------------


class FakeActor:
    def __init__(self, agent_id, device):
        self.agent_id, self.device, self.moves = agent_id, torch.device(device), []

    def to(self, device):
        self.moves.append(str(device))


def test_the_inactive_actor_waits_on_the_cpu_and_returns_even_when_an_update_fails():
    actors = [FakeActor(0, "cuda:0"), FakeActor(1, "cuda:0")]
    group = DecentralizedLayout(actors, offload_inactive=True)
    seen = []

    def step(actor):
        other = actors[1 - actor.agent_id]
        seen.append((actor.agent_id, other.moves[-1]))
        if actor.agent_id == 1:
            raise RuntimeError("update failed")
        return actor.agent_id

    with pytest.raises(RuntimeError, match="update failed"):
        group.update_each(step)
    assert seen == [(0, "cpu"), (1, "cpu")]
    assert actors[1].moves == ["cpu", "cuda:0"] and actors[0].moves == ["cpu", "cuda:0"]


def test_cpu_actors_and_disabled_offload_never_move():
    actors = [FakeActor(0, "cpu"), FakeActor(1, "cpu")]
    assert DecentralizedLayout(actors, offload_inactive=True).update_each(lambda a: a.agent_id) == [0, 1]
    gpu = [FakeActor(0, "cuda:0"), FakeActor(1, "cuda:0")]
    DecentralizedLayout(gpu, offload_inactive=False).update_each(lambda a: a.agent_id)
    assert all(not a.moves for a in actors + gpu)


def test_parallel_updates_run_one_thread_per_actor_in_agent_order():
    actors = [FakeActor(0, "cuda:0"), FakeActor(1, "cuda:1")]
    group = DecentralizedLayout(actors, parallel=True, offload_inactive=True)
    try:
        results = group.update_each(lambda a: (a.agent_id, threading.get_ident()))
    finally:
        group.close()
    assert [agent for agent, _ in results] == [0, 1]
    assert len({thread for _, thread in results} | {threading.get_ident()}) == 3
    assert all(not a.moves for a in actors)  # parallel actors each keep their own device


@pytest.mark.parametrize(
    "devices, parallel, message",
    [
        (["cuda:99", "cpu"], "none", r"hardware.agent_devices\[0\]='cuda:99'"),
        (["cpu", "gpu0"], "none", r"hardware.agent_devices\[1\]='gpu0'"),
        (["cpu", ""], "none", r"hardware.agent_devices\[1\]=''"),
        (["cpu"], "none", r"hardware.agent_devices=\['cpu'\]: give one device per agent"),
        (["cpu", "cpu"], "per_device", "parallel_training=per_device needs two different"),
        (["cpu", "cpu"], "sometimes", "hardware.parallel_training='sometimes'"),
    ],
)
def test_device_options_that_cannot_work_are_named(devices, parallel, message):
    with pytest.raises(DeviceError, match=message):
        agent_devices(devices, parallel)


def test_cpu_devices_are_accepted():
    assert agent_devices(["cpu", "cpu"]) == (torch.device("cpu"), torch.device("cpu"))


def test_devices_are_checked_before_the_model_factory_is_called():
    calls = []
    hardware = {"agent_devices": ["cuda:99", "cpu"], "parallel_training": "none"}
    generation = {"max_new_tokens": 64, "max_value_tokens": 4, "temperature": 0.7, "top_p": 0.8}
    with pytest.raises(DeviceError, match="hardware.agent_devices"):
        build_layout(lambda **kw: calls.append(kw), hardware, generation, learning_rate=2e-5, seed=0)
    assert calls == []
