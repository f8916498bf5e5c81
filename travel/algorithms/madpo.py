"""MADPO and MADPO-iter: joint DPO of both role actors on task-reward preferences.

MADPO collects once (preference_num_candidates aligned joint candidates per train row, reward_gap pair
selection), then trains num_train_epochs passes of shuffled batches of train_batch_size pairs. MADPO-iter runs
num_iterations refreshes: target and comparator candidates per row, comparator_reward pairs stored as the
iteration's replay shard, a lambda-decay replay sample, iter/* and reward distributions, then
num_train_epochs of joint DPO on that sample.

env_step counts environment_steps_per_pair per trained pair (replayed pairs included): a pair-counted budget,
not fresh rollouts. The anchor panel is evaluated before training, before every eval_every_updates-th update
(never twice without an update in between) and on the whole eval pool at the end. A run in which every
comparison tied raises NoPreferencePairs instead of reporting success.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

from travel.algorithms.dpo import (
    DEFAULT_BETA,
    DPOStep,
    GroupLogprob,
    check_zero_dropout,
    joint_dpo_update,
    packed_logprobs,
)
from travel.algorithms.preference_loop import (
    EvalGate,
    PreferenceRun,
    PreferenceTrainResult,
    check_against_budget,
    format_preference_report,
    require_pairs,
)

if TYPE_CHECKING:
    from travel.algorithms.comparators import ComparatorSpec
    from travel.algorithms.evaluation import Evaluator
    from travel.algorithms.preferences import PreferenceBatch
    from travel.data.row import TravelRow


def _positive_int(algorithm: Mapping[str, Any], key: str) -> int:
    value = algorithm.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"algorithm.{key}={value!r}: expected an integer >= 1")
    return value


class MADPOTrainer:
    """Collect task-reward preferences once, then joint DPO over the fixed pair set."""

    def __init__(
        self,
        *,
        actors: Any,
        evaluator: "Evaluator",
        algorithm: Mapping[str, Any],
        reward_config: Any,
        train_rows: Sequence["TravelRow"],
        seed: int = 0,
        tracker: Any = None,
        run_dir: Optional[str | Path] = None,
        comparator_spec: Optional["ComparatorSpec"] = None,
        score: Optional[Callable[..., Any]] = None,
        logprob: GroupLogprob = packed_logprobs,
        comparator_loaders: Optional[tuple[Callable[..., Any], Callable[..., Any]]] = None,
        progress: bool = True,
        **unused: Any,
    ):
        self.actors = actors
        self.evaluator = evaluator
        self.tracker = tracker
        self.algorithm = algorithm
        self.num_train_epochs = _positive_int(algorithm, "num_train_epochs")
        self.train_batch_size = _positive_int(algorithm, "train_batch_size")
        self.eval_every_updates = _positive_int(algorithm, "eval_every_updates")
        self.steps_per_pair = _positive_int(algorithm, "environment_steps_per_pair")
        self.beta = float(algorithm.get("dpo_beta", DEFAULT_BETA))
        if not self.beta > 0:
            raise ValueError(f"algorithm.dpo_beta={self.beta}: must be > 0")
        self.run = PreferenceRun(
            actors=actors,
            evaluator=evaluator,
            tracker=tracker,
            run_dir=run_dir,
            algorithm=algorithm,
            reward_config=reward_config,
            train_rows=train_rows,
            seed=seed,
            comparator_spec=comparator_spec,
            score=score,
            comparator_loaders=comparator_loaders,
            progress=progress,
        )
        self.budget = self.run.budget()  # bad options fail here, before any candidate is sampled
        for actor in actors.actors:
            check_zero_dropout(actor.model, f"agent {actor.agent_id}")
        self.logprob = logprob
        self.gate = EvalGate(evaluator)
        self.env_step = 0
        self.updates = 0

    # -- DPO over a pair set ----------------------------------------------------------------------------------

    def train_pairs(self, pairs: "PreferenceBatch", epochs: int) -> None:
        """`epochs` shuffled passes over `pairs` in batches of train_batch_size, one update per batch."""
        for _ in range(epochs):
            order = list(range(len(pairs)))
            self.run.rng.shuffle(order)
            for batch in pairs.select(order).minibatches(self.train_batch_size):
                if self.updates % self.eval_every_updates == 0:
                    self.gate.periodic(self.env_step)
                step = joint_dpo_update(self.actors, batch, self.beta, self.logprob)
                self.updates += 1
                self.env_step += self.steps_per_pair * len(batch)
                self.run.counts.trained_pairs += len(batch)
                self.gate.updated()
                self._log_update(step, batch)

    def _log_update(self, step: DPOStep, batch: "PreferenceBatch") -> None:
        if self.tracker is None:
            return
        record = {
            "train/dpo_loss": step.loss,
            "train/dpo_preference_accuracy": step.preference_accuracy,
            "train/dpo_joint_delta": step.mean_joint_delta,
            "train/pair_reward_gap": statistics.fmean(pair.gap for pair in batch),
            "train/pair_candidate_mean": statistics.fmean(pair.candidate_mean for pair in batch),
            "train/optimizer_updates": self.updates,
            **{f"train/dpo_delta_agent_{role}": delta for role, delta in enumerate(step.role_deltas)},
        }
        self.tracker.log(record, env_step=self.env_step)

    # -- the run ----------------------------------------------------------------------------------------------

    def train(self) -> PreferenceTrainResult:
        self.run.start()
        self.gate.periodic(self.env_step)  # the baseline, before any preference is collected
        self._train_iterations()
        require_pairs(self.run.counts.preference_pairs, self.run.counts.collected_candidates, self.run.name)
        self.gate.terminal(self.env_step, self.run.run_dir)
        return self._finish()

    def _train_iterations(self) -> None:
        collection = self.run.collect(1)
        require_pairs(len(collection.batch), collection.collected_candidates, self.run.name)
        self.train_pairs(collection.batch, self.num_train_epochs)

    def _finish(self) -> PreferenceTrainResult:
        result = PreferenceTrainResult(
            env_steps=self.env_step,
            optimizer_updates=[self.updates] * len(self.actors.actors),
            evaluations=list(self.evaluator.history),
            counts=self.run.counts,
        )
        print(format_preference_report(self.run.name, result, self.budget))
        check_against_budget(self.budget, result, len(self.actors.actors))
        return result


class MADPOIterTrainer(MADPOTrainer):
    """num_iterations refreshes of (collect with the comparator, store, replay-sample, log, DPO epochs)."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        if not self.run.iterative:
            raise ValueError("algorithm.num_iterations is required for MADPO-iter")

    def _train_iterations(self) -> None:
        for iteration in range(1, self.run.num_iterations + 1):
            collection = self.run.collect(iteration)
            sample = self.run.training_sample(iteration, len(collection.batch))
            self.run.log_iteration(iteration, self.env_step, collection, sample)
            if len(sample):
                self.train_pairs(sample, self.num_train_epochs)
            self.run.end_iteration(iteration)
