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

Checkpoints are written at the anchor evaluation points (or every checkpoint.every_env_steps) and on SIGTERM,
before an update: they keep the pass in progress (iteration, epoch, its shuffled order, the next batch and its
pairs) with the preference run's state (travel/algorithms/preference/checkpoint.py), and a resumed run
continues with that batch.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

from travel.algorithms.core.budgets import madpo_budget
from travel.algorithms.core.config import AlgorithmConfig, CollectionOptions, DPOOptions, IterativeOptions
from travel.algorithms.core.registry import AlgorithmSpec, TrainingParts, register
from travel.algorithms.core.results import TrainResult
from travel.algorithms.preference.checkpoint import restore_preference_state, save_preference_state
from travel.algorithms.preference.dpo import (
    DPOStep,
    GroupLogprob,
    check_zero_dropout,
    joint_dpo_update,
    packed_logprobs,
)
from travel.algorithms.preference.loop import (
    EvalGate,
    PreferenceRun,
    check_against_budget,
    format_preference_report,
    preference_trainer_parts,
    require_pairs,
)
from travel.checkpoint.store import CheckpointError, checkpoint_point

if TYPE_CHECKING:
    from travel.algorithms.core.evaluation import Evaluator
    from travel.algorithms.preference.batch import PreferenceBatch
    from travel.algorithms.preference.comparators import ComparatorSpec
    from travel.data.row import TravelRow


@dataclass(frozen=True)
class MADPOConfig(DPOOptions, CollectionOptions, AlgorithmConfig):
    """conf/algorithm/madpo.yaml."""

    name: str = "madpo"
    num_train_epochs: int = 7


@dataclass(frozen=True)
class MADPOIterConfig(IterativeOptions, MADPOConfig):
    """conf/algorithm/madpo_iter.yaml (num_train_epochs per iteration)."""

    name: str = "madpo_iter"
    num_train_epochs: int = 1
    pair_selection: str = "comparator_reward"


class MADPOTrainer:
    """Collect task-reward preferences once, then joint DPO over the fixed pair set. `algorithm` is the typed
    config, or a mapping of its options."""

    config_class: type[MADPOConfig] = MADPOConfig

    def __init__(
        self,
        *,
        actors: Any,
        evaluator: "Evaluator",
        algorithm: MADPOConfig | Mapping[str, Any],
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
        checkpoints: Any = None,
        resume: Any = None,
        stop: Any = None,
    ):
        """`checkpoints`, `resume` and `stop` as in MAGRPOTrainer (travel/algorithms/online/magrpo.py)."""
        config = self.config_class.from_mapping(algorithm)
        self.actors = actors
        self.evaluator = evaluator
        self.tracker = tracker
        self.algorithm = config
        self.num_train_epochs = config.num_train_epochs
        self.train_batch_size = config.train_batch_size
        self.eval_every_updates = config.eval_every_updates
        self.steps_per_pair = config.environment_steps_per_pair
        self.beta = config.dpo_beta
        self.run = PreferenceRun(
            actors=actors,
            evaluator=evaluator,
            tracker=tracker,
            run_dir=run_dir,
            algorithm=config,
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
        self.update_seconds = 0.0
        self.checkpoints, self.stop = checkpoints, stop
        # a resumed run's pass in progress: (its position, its pairs)
        self._resumed: Optional[tuple[dict[str, Any], "PreferenceBatch"]] = None
        if resume is not None:
            self._restore(resume.trainer, Path(resume.path))

    # -- DPO over a pair set ----------------------------------------------------------------------------------

    def train_pairs(self, pairs: "PreferenceBatch", epochs: int, iteration: int, start: Optional[dict[str, Any]] = None) -> None:
        """`epochs` shuffled passes over `pairs` in batches of train_batch_size, one update per batch; `start` (a
        resumed checkpoint's position) continues its epoch with its order at its batch."""
        first_epoch = start["epoch"] if start is not None else 0
        for epoch in range(first_epoch, epochs):
            resumed = start is not None and epoch == first_epoch
            if resumed:
                order, first_batch = [int(i) for i in start["order"]], int(start["batch"])  # type: ignore[index]
            else:
                order, first_batch = list(range(len(pairs))), 0
                self.run.rng.shuffle(order)
            for index, batch in enumerate(pairs.select(order).minibatches(self.train_batch_size)):
                if index < first_batch:
                    continue
                at_eval_point = self.updates % self.eval_every_updates == 0
                if at_eval_point:
                    self.gate.periodic(self.env_step)
                if not (resumed and index == first_batch):  # a resumed run starts where its checkpoint was written
                    position = {"iteration": iteration, "epoch": epoch, "order": order, "batch": index}
                    self._checkpoint(position, pairs, at_eval_point)
                started = time.perf_counter()
                step = joint_dpo_update(self.actors, batch, self.beta, self.logprob)
                self.update_seconds = time.perf_counter() - started
                self.updates += 1
                self.env_step += self.steps_per_pair * len(batch)
                self.run.counts.trained_pairs += len(batch)
                self.gate.updated()
                self._log_update(step, batch)

    # -- checkpoints ------------------------------------------------------------------------------------------

    def _checkpoint(self, position: dict[str, Any], pairs: "PreferenceBatch", at_eval_point: bool) -> None:
        def save() -> Path:
            state = {
                "trainer": self.algorithm.name,
                "position": position,
                "env_step": self.env_step,
                "updates": self.updates,
                "gate": self.gate.state(),
            }
            return self.checkpoints.save(
                self.env_step, self.actors, state, self.tracker, extra=lambda d: save_preference_state(self.run, d, pairs)
            )

        checkpoint_point(self.checkpoints, self.stop, self.env_step, at_eval_point, save)

    def _restore(self, state: dict[str, Any], path: Path) -> None:
        if state.get("trainer") != self.algorithm.name:
            raise ValueError(f"a {state.get('trainer')!r} checkpoint cannot resume algorithm={self.algorithm.name}")
        self.env_step, self.updates = int(state["env_step"]), int(state["updates"])
        self.gate.restore(state["gate"])
        pairs = restore_preference_state(self.run, path)
        if pairs is None:
            raise CheckpointError(f"resume={path}: the checkpoint keeps no training pairs, so no DPO pass can continue")
        self._resumed = (state["position"], pairs)

    def _resume_pass(self) -> int:
        """A resumed run finishes the pass its checkpoint was written in; returns that iteration (0: none)."""
        if self._resumed is None:
            return 0
        position, pairs = self._resumed
        self.train_pairs(pairs, self.num_train_epochs, int(position["iteration"]), position)
        return int(position["iteration"])

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
            "time/update_s": self.update_seconds,
            **{f"train/dpo_delta_agent_{role}": delta for role, delta in enumerate(step.role_deltas)},
            **{f"train/grad_norm_agent_{role}": norm for role, norm in enumerate(step.grad_norms)},
        }
        self.tracker.log(record, env_step=self.env_step)

    # -- the run ----------------------------------------------------------------------------------------------

    def train(self) -> TrainResult:
        if self._resumed is None:
            self.run.start()
            self.gate.periodic(self.env_step)  # the baseline, before any preference is collected
        self._train_iterations()
        require_pairs(self.run.counts.preference_pairs, self.run.counts.collected_candidates, self.run.name)
        self.gate.terminal(self.env_step, self.run.run_dir)
        return self._finish()

    def _train_iterations(self) -> None:
        if self._resume_pass():
            return
        collection = self.run.collect(1)
        require_pairs(len(collection.batch), collection.collected_candidates, self.run.name)
        self.train_pairs(collection.batch, self.num_train_epochs, 1)

    def _finish(self) -> TrainResult:
        result = TrainResult(
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

    config_class = MADPOIterConfig

    def _train_iterations(self) -> None:
        resumed = self._resume_pass()
        if resumed:
            self.run.end_iteration(resumed)
        for iteration in range(resumed + 1, self.run.num_iterations + 1):
            collection = self.run.collect(iteration, self.env_step)
            sample = self.run.training_sample(iteration, len(collection.batch))
            self.run.log_iteration(iteration, self.env_step, collection, sample)
            if len(sample):
                self.train_pairs(sample, self.num_train_epochs, iteration)
            self.run.end_iteration(iteration)


def build_madpo(config: MADPOConfig, parts: TrainingParts) -> MADPOTrainer:
    trainer = MADPOIterTrainer if config.iterative else MADPOTrainer
    return trainer(**preference_trainer_parts(config, parts))


register(AlgorithmSpec("madpo", MADPOConfig, budget=madpo_budget, build_trainer=build_madpo, checkpoints=True))
register(AlgorithmSpec("madpo_iter", MADPOIterConfig, budget=madpo_budget, build_trainer=build_madpo, checkpoints=True))
