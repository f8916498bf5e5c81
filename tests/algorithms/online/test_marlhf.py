"""MARLHF and MARLHF-iter over the scripted role actors of test_madpo.py: a real tiny reward model, real MAGRPO
updates, and evaluation on the task reward."""

import contextlib
import json

import pytest
import torch

from tests.algorithms.preference.test_madpo import CURRENT_COPY, changed, parts, records, snapshot, texts
from travel.agents.models import build_tiny_random
from travel.agents.layouts import DecentralizedLayout
from travel.algorithms.online.marlhf import MARLHFIterTrainer, MARLHFTrainer
from travel.algorithms.preference.loop import NoPreferencePairs
from travel.algorithms.preference.replay import ReplayStore
from travel.reward import score_joint_action

MARLHF = dict(
    name="marlhf",
    num_train_epochs=2,
    num_generations=2,
    rollout_buffer_size=2,
    use_short_phase=False,
    eval_every_epochs=1,
    advantage_mode="mean",
    advantage_normalization=False,
    logging_steps=1,
    train_batch_size=2,
    preference_num_candidates=3,
    preference_generation_batch_size=3,
    preference_pairs_per_sample=2,
    pair_selection="reward_gap",
    reward_model_name=None,
    reward_model_device="cpu",
    reward_learning_rate=1e-3,
    reward_num_train_epochs=1,
    reward_train_batch_size=1,
    reward_max_length=4096,
    reward_freeze_backbone=False,
)
MARLHF_ITER = dict(
    MARLHF,
    name="marlhf_iter",
    num_iterations=2,
    num_train_epochs=1,
    preference_num_candidates=2,
    comparator_num_candidates=None,
    pair_selection="comparator_reward",
    preference_scoring_reward="task",
    preference_replay_mode="lambda_decay",
    preference_replay_lambda=0.8,
    preference_replay_sample_size=None,
    log_reward_distribution=True,
)


class BaseLoader:
    """The reward model's base weights: a fresh tiny decoder each call (the refit starts from the same point)."""

    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        loaded = build_tiny_random(seed=90)
        return loaded.model, loaded.tokenizer


def trainer(cls, tmp_path, algorithm, **harness):
    group, evaluator, tracker, train, evaluation = parts(tmp_path, **harness)
    loader = BaseLoader()
    made = cls(
        sampler=evaluator.sampler, actors=group, evaluator=evaluator, tracker=tracker, run_dir=tmp_path,
        algorithm=algorithm, reward_config=None, train_rows=train, seed=4, reward_base_loader=loader,
        comparator_spec=CURRENT_COPY if "num_iterations" in algorithm else None, progress=False,
    )
    return made, group, tracker, loader, evaluation


def spy_learned_scores(made):
    """Record every call of the learned-reward scorer, and whether an evaluation was running at the time."""
    calls, evaluating = [], {"now": False}
    scorer, periodic, terminal = made.learned_scores, made.evaluator.periodic, made.evaluator.terminal

    def scores(row, pairs, config=None):
        results = scorer(row, pairs, config)
        calls.append((row.source_index, len(pairs), evaluating["now"], [r.reward for r in results]))
        return results

    def during_eval(method):
        def run(*args, **kwargs):
            evaluating["now"] = True
            try:
                return method(*args, **kwargs)
            finally:
                evaluating["now"] = False

        return run

    made.learned_sampler.score = scores
    made.evaluator.periodic, made.evaluator.terminal = during_eval(periodic), during_eval(terminal)
    return calls


def test_marlhf_fits_once_then_trains_online_on_the_learned_reward_and_evaluates_on_the_task_reward(tmp_path):
    made, group, tracker, loader, evaluation = trainer(MARLHFTrainer, tmp_path, MARLHF)
    calls = spy_learned_scores(made)
    before = snapshot(group)
    result = made.train()
    tracker.close()
    # 2 rows x 3 candidates (three distinct task rewards) -> 2 pairs per row; one reward-model fit, batch 1
    assert result.counts.collected_candidates == 6 and result.counts.preference_pairs == 4
    assert result.counts.reward_model_updates == 4 and loader.calls == 1
    # online: 2 epochs x 2 rows x 2 generations; one buffer of 2 prompts per epoch
    assert result.env_steps == 8 and result.optimizer_updates == [2, 2]
    assert result.eval_env_steps == [0, 4, 8]
    assert changed(before, group) == [True, True]
    # every training rollout (and nothing else) was scored by the reward model, never during an evaluation
    assert [call[:3] for call in calls] == [(0, 2, False), (1, 2, False)] * 2
    # evaluation: the greedy joint action (the valid plan here) scored by the task reward
    row = evaluation[0]
    task_reward = score_joint_action(row, [texts(row, 0, "valid"), texts(row, 1, "valid")]).reward
    logged = records(tmp_path)
    eval_rewards = [r["eval/reward"] for r in logged if "eval/reward" in r]
    assert eval_rewards == pytest.approx([task_reward] * 3)
    # training: each buffer's reward is the mean learned score of its rollouts, not a task reward
    train_rewards = [r["train/reward"] for r in logged if "train/reward" in r]
    per_rollout = [sum(call[3]) / len(call[3]) for call in calls]
    assert train_rewards == pytest.approx([sum(per_rollout[0:2]) / 2, sum(per_rollout[2:4]) / 2])
    # the training rollouts (valid, all-dash) of these rows would have a task-reward mean of:
    task_mean = sum(score_joint_action(row, [texts(row, 0, k), texts(row, 1, k)]).reward for k in ("valid", "dash")) / 2
    assert all(value != pytest.approx(task_mean) for value in train_rewards)
    assert not made.reward_model.training and not any(p.requires_grad for p in made.reward_model.parameters())
    assert (tmp_path / "preference_replay" / "iteration_0001.json").is_file()
    assert not any(key.startswith("iter/") for r in logged for key in r)


def test_an_all_tied_marlhf_run_raises_before_fitting(tmp_path):
    made, group, tracker, loader, _ = trainer(MARLHFTrainer, tmp_path, MARLHF, target_kinds=("dash",))
    with pytest.raises(NoPreferencePairs, match="no non-tied preference pairs: algorithm=marlhf"):
        made.train()
    tracker.close()
    assert loader.calls == 0


def test_marlhf_iter_refits_a_fresh_reward_model_every_iteration(tmp_path):
    made, group, tracker, loader, _ = trainer(
        MARLHFIterTrainer, tmp_path, MARLHF_ITER, target_kinds=("valid", "junk"), comparator_kinds=("dash",)
    )
    fitted = []
    fit = made.fit

    def recording_fit(pairs, iteration):
        fit(pairs, iteration)
        fitted.append((iteration, len(pairs), made.reward_model))

    made.fit = recording_fit
    result = made.train()
    tracker.close()
    assert [(i, n) for i, n, _ in fitted] == [(1, 4), (2, 4)]
    assert fitted[0][2] is not fitted[1][2] and loader.calls == 2
    assert result.counts.collected_candidates == 2 * 2 * (2 + 2)
    # 2 iterations x 1 epoch x 2 rows x 2 generations of online rollouts
    assert result.env_steps == 8 and result.optimizer_updates == [2, 2] and result.eval_env_steps == [0, 4, 8]
    iteration_records = [r for r in records(tmp_path) if "iter/current_iteration" in r]
    assert [(r["iter/current_iteration"], r["env_step"]) for r in iteration_records] == [(1, 0), (2, 4)]
    assert ReplayStore(tmp_path / "preference_replay", "decentralized").reload() == [1, 2]
    for iteration in (1, 2):
        payload = json.loads((tmp_path / "reward_distributions" / f"iteration_{iteration:04d}.json").read_text())
        assert payload["num_bins"] == 16 and [payload["reward_min"], payload["reward_max"]] == [-0.25, 1.0]


def test_both_actors_wait_on_the_cpu_while_the_reward_model_fits_and_come_back_on_failure():
    moves = []

    class Actor:
        def __init__(self, name):
            self.name, self.device = name, torch.device("cuda", 0)

        def to(self, device):
            moves.append((self.name, torch.device(device).type))

    group = DecentralizedLayout([Actor("a0"), Actor("a1")])
    with contextlib.suppress(RuntimeError), group.all_on_cpu():
        assert moves == [("a0", "cpu"), ("a1", "cpu")]
        raise RuntimeError("fitting failed")
    assert moves[2:] == [("a0", "cuda"), ("a1", "cuda")]


def test_only_task_reward_labels_are_supported(tmp_path):
    with pytest.raises(ValueError, match="preference_scoring_reward='reward_model'"):
        trainer(MARLHFIterTrainer, tmp_path, dict(MARLHF_ITER, preference_scoring_reward="reward_model"))
