"""MADPO and MADPO-iter over scripted role actors with real tiny models and the real task reward.

The scripted actors (also used by test_marlhf.py) sample candidates whose texts are chosen by "kind" so the task
reward ranks them, with token ids unique per candidate, while their tiny random models and AdamW optimizers are
real, so DPO and MAGRPO updates really run. Target candidates come from `sample`; comparator candidates from
`decoder.generate` (the path a current_copy comparator takes through the actor's own decoder).
"""

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests.fixtures import (
    all_dash_action_text,
    fixture_raw,
    role_action_text,
    valid_plan_values,
)
from travel.agents.layouts import DecentralizedLayout
from travel.agents.models import build_tiny_random
from travel.algorithms.preference.comparators import ComparatorSpec
from travel.algorithms.core.evaluation import Evaluator
from travel.algorithms.preference.madpo import MADPOIterTrainer, MADPOTrainer
from travel.algorithms.preference.loop import NoPreferencePairs
from travel.algorithms.preference.replay import ReplayStore
from travel.algorithms.core.rollout import JointRolloutSampler
from travel.data.normalise import normalise_row
from travel.task.roles import assistant_prefill

torch.set_num_threads(1)  # tiny models: thread start-up costs more than the matmuls on a shared 2-core machine


@dataclass
class ScriptedCandidate:
    text: str
    token_ids: list
    value_mask: list


def rows(count: int, first_index: int = 0):
    return [normalise_row(fixture_raw(), first_index + i) for i in range(count)]


def texts(row, agent_id: int, kind: str) -> str:
    if kind == "valid":
        return role_action_text(agent_id, valid_plan_values(row), row.days)
    if kind == "dash":
        return all_dash_action_text(agent_id, row.days)
    return assistant_prefill(agent_id) + "oops"


class ScriptedActor:
    def __init__(self, agent_id: int, seed: int, target_kinds, comparator_kinds=("dash",), lr: float = 1e-2):
        loaded = build_tiny_random(seed=seed)
        self.agent_id = agent_id
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)
        self.device = torch.device("cpu")
        self.target_kinds = list(target_kinds)
        self.comparator_kinds = list(comparator_kinds)
        self.decoder = SimpleNamespace(generate=self._generate_comparator)
        self.issued: list[ScriptedCandidate] = []
        self.sample_calls: list[tuple[int, bool]] = []
        self._counter = 0

    def _candidate(self, row, kind: str) -> ScriptedCandidate:
        self._counter += 1
        base = 40 + (7 * self._counter + 3 * self.agent_id) % 200
        candidate = ScriptedCandidate(texts(row, self.agent_id, kind), [base, base + 1, 5, base + 2], [1, 1, 0, 1])
        self.issued.append(candidate)
        return candidate

    def prompt_ids(self, row):
        return [11 + row.source_index, 12, 13 + self.agent_id]

    def request(self, row):
        prompt = f"<|im_start|>user\nrow {row.source_index} role {self.agent_id}<|im_end|>\n" + assistant_prefill(self.agent_id)
        return SimpleNamespace(prompt=prompt, row=row)

    def sample(self, row, num_candidates, *, greedy=False):
        self.sample_calls.append((num_candidates, greedy))
        if greedy:
            return [self._candidate(row, "valid") for _ in range(num_candidates)]
        return [self._candidate(row, self.target_kinds[k % len(self.target_kinds)]) for k in range(num_candidates)]

    def _generate_comparator(self, requests, num_candidates, greedy=False, generator=None):
        assert not greedy and generator is not None
        (request,) = requests
        return [[self._candidate(request.row, self.comparator_kinds[k % len(self.comparator_kinds)]) for k in range(num_candidates)]]

    def to(self, device):
        self.model.to(device)


def parts(tmp_path: Path, train_count=2, target_kinds=("valid", "dash", "junk"), comparator_kinds=("dash",)):
    """(actor group, evaluator, tracker, train rows, eval rows) over scripted actors and the real task reward."""
    from travel.logging.tracker import Tracker

    train = rows(train_count)
    evaluation = rows(1, first_index=100)
    actors = [ScriptedActor(a, seed=70 + a, target_kinds=target_kinds, comparator_kinds=comparator_kinds) for a in range(2)]
    group = DecentralizedLayout(actors)
    tracker = Tracker(tmp_path)
    sampler = JointRolloutSampler(group.actors)
    evaluator = Evaluator(sampler, anchor_rows=evaluation, eval_rows=evaluation, panel_size=1, tracker=tracker, progress=False)
    return group, evaluator, tracker, train, evaluation


def snapshot(group):
    return [[p.detach().clone() for p in actor.model.parameters()] for actor in group.actors]


def changed(before, group):
    return [any(not torch.equal(a, b) for a, b in zip(old, actor.model.parameters())) for old, actor in zip(before, group.actors)]


def records(run_dir: Path):
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


# ---- MADPO ----------------------------------------------------------------------------------------------

MADPO = dict(
    name="madpo",
    num_train_epochs=2,
    train_batch_size=2,
    eval_every_updates=2,
    dpo_beta=0.1,
    environment_steps_per_pair=2,
    preference_num_candidates=3,
    preference_generation_batch_size=2,
    preference_pairs_per_sample=2,
    pair_selection="reward_gap",
    use_short_phase=False,
)
MADPO_ITER = dict(
    MADPO,
    name="madpo_iter",
    num_iterations=2,
    num_train_epochs=1,
    eval_every_updates=1,
    preference_num_candidates=2,
    comparator_num_candidates=None,
    pair_selection="comparator_reward",
    preference_replay_mode="lambda_decay",
    preference_replay_lambda=0.8,
    preference_replay_sample_size=None,
    log_reward_distribution=True,
)
CURRENT_COPY = ComparatorSpec("current_copy", "current_copy", devices=("cpu", "cpu"))


def trainer(cls, tmp_path, algorithm, **harness):
    group, evaluator, tracker, train, _ = parts(tmp_path, **harness)
    made = cls(
        actors=group, evaluator=evaluator, tracker=tracker, run_dir=tmp_path, algorithm=algorithm, reward_config=None,
        train_rows=train, seed=3, comparator_spec=CURRENT_COPY if "num_iterations" in algorithm else None, progress=False,
    )
    return made, group, tracker


def expected_eval_steps(update_sizes, eval_every, steps_per_pair):
    """Baseline at 0; before update u when u % eval_every == 0 unless nothing changed since; terminal at the end."""
    steps, env, last = [0], 0, 0
    for update, size in enumerate(update_sizes):
        if update % eval_every == 0 and env != last:
            steps.append(env)
            last = env
        env += steps_per_pair * size
    return steps + [env]


def test_madpo_collects_once_then_trains_its_epochs_with_pair_counted_env_steps(tmp_path):
    madpo, group, tracker = trainer(MADPOTrainer, tmp_path, MADPO)
    before = snapshot(group)
    result = madpo.train()
    tracker.close()
    # 2 rows x 3 candidates (valid, all-dash, broken: three distinct rewards) -> 3 ordered pairs, 2 widest kept
    assert result.counts.collected_candidates == 6
    assert result.counts.preference_pairs == 4
    # 2 epochs x 4 pairs in batches of 2 -> 4 updates of 2 pairs, 2 env steps per pair
    assert result.optimizer_updates == [4, 4]
    assert result.env_steps == 2 * 4 * 2
    assert result.counts.trained_pairs == 8 and result.counts.replayed_pairs == 0
    assert result.eval_env_steps == expected_eval_steps([2, 2, 2, 2], 2, 2) == [0, 8, 16]
    assert changed(before, group) == [True, True]
    # generation calls of at most preference_generation_batch_size: 3 = 2 + 1 per row, then greedy evals
    assert [c for c in group.actors[0].sample_calls if not c[1]] == [(2, False), (1, False)] * 2
    logged = records(tmp_path)
    assert [r["env_step"] for r in logged if "eval/reward" in r] == [0, 8, 16]
    assert not any(key.startswith("iter/") for r in logged for key in r)


def test_madpo_stores_its_pairs_with_the_exact_generated_tokens(tmp_path):
    madpo, group, tracker = trainer(MADPOTrainer, tmp_path, MADPO)
    madpo.train()
    tracker.close()
    stored = ReplayStore(tmp_path / "preference_replay", "decentralized").load(1)
    assert len(stored) == 4
    issued = [{tuple(c.token_ids): c for c in actor.issued} for actor in group.actors]
    for pair in stored:
        assert pair.winner_reward > pair.loser_reward
        for side in (pair.winner, pair.loser):
            for agent, sequence in enumerate(side.sequences):
                candidate = issued[agent][sequence.ids]
                assert side.texts[agent] == candidate.text and list(sequence.mask) == candidate.value_mask
        assert stored.prompt_ids(pair, 1) == tuple(group.actors[1].prompt_ids(madpo.run.train_rows[pair.row_index]))


def test_an_all_tied_madpo_run_raises_and_trains_nothing(tmp_path):
    madpo, group, tracker = trainer(MADPOTrainer, tmp_path, MADPO, target_kinds=("dash",))
    before = snapshot(group)
    with pytest.raises(NoPreferencePairs, match="no non-tied preference pairs: algorithm=madpo collected 6 joint candidates"):
        madpo.train()
    tracker.close()
    assert changed(before, group) == [False, False]


def test_madpo_iter_refreshes_replays_and_logs_each_iteration(tmp_path):
    madpo, group, tracker = trainer(MADPOIterTrainer, tmp_path, MADPO_ITER, target_kinds=("valid", "junk"), comparator_kinds=("dash",))
    before = snapshot(group)
    result = madpo.train()
    tracker.close()
    # per iteration and row: target valid beats comparator all-dash, comparator all-dash beats target broken
    assert result.counts.collected_candidates == 2 * 2 * (2 + 2)
    assert result.counts.preference_pairs == 2 * 4
    # each iteration trains one epoch on a replay sample as large as its new pairs: 2 updates of 2 pairs
    assert result.optimizer_updates == [4, 4] and result.env_steps == 4 * 2 * 2
    assert result.eval_env_steps == expected_eval_steps([2, 2, 2, 2], 1, 2) == [0, 4, 8, 12, 16]
    assert changed(before, group) == [True, True]
    store = ReplayStore(tmp_path / "preference_replay", "decentralized")
    assert store.reload() == [1, 2]
    comparator_pools = {pair.loser_ref.pool for pair in store.load(1)} | {pair.winner_ref.pool for pair in store.load(1)}
    assert comparator_pools == {"target", "comparator"}
    iteration_records = [r for r in records(tmp_path) if "iter/current_iteration" in r]
    assert [r["iter/current_iteration"] for r in iteration_records] == [1, 2]
    assert [r["iter/total_preference_pairs"] for r in iteration_records] == [4, 8]
    assert [r["iter/train_preference_pairs"] for r in iteration_records] == [4, 4]
    assert [r["env_step"] for r in iteration_records] == [0, 8]  # logged after collection, before that iteration trains
    for iteration in (1, 2):
        payload = json.loads((tmp_path / "reward_distributions" / f"iteration_{iteration:04d}.json").read_text())
        assert payload["num_bins"] == 16 and len(payload["bin_edges"]) == 17
        assert payload["candidate"]["target"]["sample_count"] == 4 and payload["candidate"]["comparator"]["sample_count"] == 4
    # the replay sample of iteration 2 draws some of its pairs from iteration 1's shard, reported as replayed
    assert 0 <= result.counts.replayed_pairs <= 4
    assert result.counts.trained_pairs == 8


def test_an_all_tied_madpo_iter_run_raises_after_its_iterations(tmp_path):
    madpo, _, tracker = trainer(MADPOIterTrainer, tmp_path, MADPO_ITER, target_kinds=("dash",), comparator_kinds=("dash",))
    with pytest.raises(NoPreferencePairs, match="algorithm=madpo_iter collected 16 joint candidates"):
        madpo.train()
    tracker.close()
    assert ReplayStore(tmp_path / "preference_replay", "decentralized").reload() == [1, 2]


def test_bad_options_fail_before_any_candidate_is_sampled(tmp_path):
    with pytest.raises(ValueError, match="train_batch_size=0"):
        trainer(MADPOTrainer, tmp_path, dict(MADPO, train_batch_size=0))
    with pytest.raises(ValueError, match="dpo_beta"):
        trainer(MADPOTrainer, tmp_path, dict(MADPO, dpo_beta=0.0))
    with pytest.raises(ValueError, match="pair_selection=comparator_reward"):
        trainer(MADPOTrainer, tmp_path, dict(MADPO, pair_selection="comparator_reward"))


def test_active_dropout_fails_at_construction_before_any_candidate_is_sampled(tmp_path):
    from travel.algorithms.preference.dpo import DropoutError

    group, evaluator, tracker, train, _ = parts(tmp_path)
    group.actors[1].model.config.attention_dropout = 0.1
    with pytest.raises(DropoutError, match="agent 1"):
        MADPOTrainer(actors=group, evaluator=evaluator, tracker=tracker, run_dir=tmp_path, algorithm=MADPO,
                     reward_config=None, train_rows=train, progress=False)
    tracker.close()
    assert group.actors[0].sample_calls == [] and group.actors[1].sample_calls == []


def test_counts_outside_the_dry_run_budget_are_reported():
    from travel.algorithms.core.budgets import Budget
    from travel.algorithms.preference.loop import check_against_budget
    from travel.algorithms.core.results import BudgetDrift, PreferenceCounts, TrainResult

    budget = Budget(
        algorithm="madpo", train_rows=2, collected_candidates=6, env_steps=16, env_steps_unit="pair_counted",
        env_steps_is_upper_bound=True, env_steps_by_phase={"dpo": 16}, optimizer_updates_per_agent=4,
        optimizer_updates_is_upper_bound=True, eval_env_steps=None, preference_pairs_upper_bound=4,
    )
    within = TrainResult(12, [3, 3], [], counts=PreferenceCounts(collected_candidates=6, preference_pairs=3))
    check_against_budget(budget, within)
    over = TrainResult(18, [5, 5], [], counts=PreferenceCounts(collected_candidates=5, preference_pairs=3))
    with pytest.raises(BudgetDrift, match=r"collected candidates 5 != 6; env steps 18 > 16; optimizer updates \[5, 5\] > 4"):
        check_against_budget(budget, over)
