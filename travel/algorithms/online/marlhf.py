"""MARLHF and MARLHF-iter: a Bradley-Terry reward model fitted on task-reward preferences, then online MAGRPO
on the reward model's score.

MARLHF collects preferences once as MADPO does (reward_gap pairs), fits the reward model (both actors parked
on the CPU meanwhile), then runs the MAGRPO loop of travel.algorithms.online.magrpo over all train rows with the
learned score as the training reward. MARLHF-iter runs num_iterations refreshes: before every
num_train_epochs-th online epoch it collects target and comparator candidates, stores the pairs as a replay
shard, draws a lambda-decay replay sample, logs iter/* and the reward distributions, and refits a fresh
reward model from the base weights on that sample.

MARLHF-iter owns its loop: per iteration it collects, fits, then runs its num_train_epochs MAGRPO epochs
through the MAGRPO trainer's `train_epoch`.

Only the training rollouts are scored by the reward model (through their own rollout sampler); the evaluator
keeps the run's task-reward sampler, so every eval/* point is the task reward and its metrics. env_step counts
online joint actions; collection does not advance it.

Checkpoints are the online loop's (travel/algorithms/online/magrpo.py), with the preference run's state
(travel/algorithms/preference/checkpoint.py) and the fitted reward model added. A resumed run skips the
collection and fit its checkpoint already holds; MARLHF-iter resumed at an iteration's first epoch before its
evaluation refreshes that iteration first.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

import torch

from travel.algorithms.core.budgets import marlhf_budget, online_schedule
from travel.algorithms.core.config import (
    AlgorithmConfig,
    AlgorithmConfigError,
    CollectionOptions,
    IterativeOptions,
    OnlineOptions,
    RewardModelOptions,
)
from travel.algorithms.core.registry import AlgorithmSpec, TrainingParts, register
from travel.algorithms.core.results import TrainResult
from travel.algorithms.core.rollout import JointRolloutSampler
from travel.algorithms.online.magrpo import MAGRPOTrainer, group_advantage
from travel.algorithms.preference.checkpoint import restore_preference_state, save_preference_state
from travel.algorithms.preference.loop import (
    PreferenceRun,
    TrainRows,
    check_against_budget,
    format_preference_report,
    preference_trainer_parts,
    require_pairs,
)
from travel.algorithms.preference.reward_model import (
    JointRewardModel,
    PreferenceText,
    RewardFitSettings,
    build_reward_model,
    fit_reward_model,
    joint_text,
    load_pretrained_base,
    release_memory,
)
from travel.checkpoint.store import load_plain, save_plain
from travel.reward import RewardResult

REWARD_MODEL_FILE = "reward_model.pt"

if TYPE_CHECKING:
    from travel.algorithms.core.evaluation import Evaluator
    from travel.algorithms.preference.batch import PreferenceBatch
    from travel.algorithms.preference.comparators import ComparatorSpec
    from travel.data.row import TravelRow


@dataclass(frozen=True)
class MARLHFConfig(RewardModelOptions, OnlineOptions, CollectionOptions, AlgorithmConfig):
    """conf/algorithm/marlhf.yaml."""

    name: str = "marlhf"
    num_train_epochs: int = 21


@dataclass(frozen=True)
class MARLHFIterConfig(IterativeOptions, MARLHFConfig):
    """conf/algorithm/marlhf_iter.yaml (num_train_epochs per iteration)."""

    name: str = "marlhf_iter"
    num_train_epochs: int = 3
    pair_selection: str = "comparator_reward"
    preference_scoring_reward: str = "task"

    def validate(self) -> None:
        super().validate()
        if self.preference_scoring_reward != "task":
            raise AlgorithmConfigError(
                f"algorithm.preference_scoring_reward={self.preference_scoring_reward!r}: preferences are labelled "
                f"by the task reward only"
            )


def base_loader(name: Optional[str], model_factory: Optional[Callable[..., Any]]) -> Callable[[], tuple[Any, Any]]:
    """What a fresh reward model is built from: `algorithm.reward_model_name` (a hub id or local directory), or with
    null the actors' base model from `model_factory`, loaded on the CPU."""
    if name:
        return lambda: load_pretrained_base(str(name))
    if model_factory is None:
        raise ValueError("algorithm.reward_model_name=null uses the actors' base model, but no model factory was given")

    def load_actor_base() -> tuple[Any, Any]:
        loaded = model_factory(device="cpu", gradient_checkpointing=False)
        return loaded.model, loaded.tokenizer

    return load_actor_base


def reward_fit_settings(config: MARLHFConfig, seed: int) -> RewardFitSettings:
    """The reward model's fitting options of a MARLHF config (algorithm.reward_*)."""
    return RewardFitSettings(
        learning_rate=config.reward_learning_rate,
        num_epochs=config.reward_num_train_epochs,
        batch_size=config.reward_train_batch_size,
        seed=int(seed),
    )


def comparison_texts(pairs: Iterable[Any], prompts_of_row: Callable[[int], Sequence[str]]) -> list[PreferenceText]:
    """Each pair's winner and loser as reward-model inputs, under the policies' prompts of the pair's row
    (`prompts_of_row(row_index)`)."""
    out = []
    for pair in pairs:
        prompts = prompts_of_row(pair.row_index)
        out.append(PreferenceText(joint_text(list(pair.winner.texts), prompts), joint_text(list(pair.loser.texts), prompts)))
    return out


def learned_rewards(reward_model: JointRewardModel, prompts: Sequence[str], pairs: Sequence[Sequence[str]]) -> list[RewardResult]:
    """The reward model's scores of joint actions (role-action pairs) under the policies' `prompts`, as rewards."""
    scores = reward_model.score_texts([joint_text(list(pair), prompts) for pair in pairs])
    return [RewardResult(reward=score, metrics={}, backend="learned_reward_model") for score in scores]


class MARLHFTrainer:
    """Collect once, fit the reward model once, then the MAGRPO online phase on the learned reward. `algorithm`
    is the typed config, or a mapping of its options."""

    config_class: type[MARLHFConfig] = MARLHFConfig

    def __init__(
        self,
        *,
        sampler: Any,
        actors: Any,
        evaluator: "Evaluator",
        algorithm: MARLHFConfig | Mapping[str, Any],
        reward_config: Any,
        train_rows: Sequence["TravelRow"],
        seed: int = 0,
        tracker: Any = None,
        run_dir: Optional[str | Path] = None,
        comparator_spec: Optional["ComparatorSpec"] = None,
        model_factory: Optional[Callable[..., Any]] = None,
        reward_base_loader: Optional[Callable[[], tuple[Any, Any]]] = None,
        gradient_checkpointing: bool = False,
        score: Optional[Callable[..., Any]] = None,
        comparator_loaders: Optional[tuple[Callable[..., Any], Callable[..., Any]]] = None,
        progress: bool = True,
        checkpoints: Any = None,
        resume: Any = None,
        stop: Any = None,
    ):
        """`checkpoints`, `resume` and `stop` as in MAGRPOTrainer (travel/algorithms/online/magrpo.py)."""

        algorithm = config = self.config_class.from_mapping(algorithm)
        self.actors = actors
        self.evaluator = evaluator
        self.tracker = tracker
        self.algorithm = algorithm
        self.progress = progress
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
        self.budget = self.run.budget()
        self.epochs_per_iteration = config.num_train_epochs
        self.schedule = online_schedule(algorithm, TrainRows(tuple(train_rows)), self.run.num_iterations * self.epochs_per_iteration)
        self.rows_by_index = {row.source_index: row for row in train_rows}
        self.fit_settings = reward_fit_settings(config, seed)
        self.reward_device = config.reward_model_device
        self.reward_max_length = config.reward_max_length
        self.freeze_backbone = config.reward_freeze_backbone
        self.gradient_checkpointing = bool(gradient_checkpointing)
        self.load_reward_base = reward_base_loader or base_loader(config.reward_model_name, model_factory)
        self.reward_model: Optional[JointRewardModel] = None
        self.checkpoints, self.resume, self.stop = checkpoints, resume, stop
        # training rollouts only: the evaluator keeps the task-reward sampler it was built with
        self.learned_sampler = JointRolloutSampler(
            actors,
            reward_config,
            score=self.learned_scores,
            parallel=bool(getattr(actors, "parallel", False)),
            rows_per_call=getattr(sampler, "rows_per_call", None),
        )

    # -- the learned reward -----------------------------------------------------------------------------------

    def learned_scores(self, row: "TravelRow", pairs: list[tuple[str, str]], config: Any = None) -> list["RewardResult"]:
        """The rollout seam's score function during the online phase: reward-model scores, no task metrics."""

        if self.reward_model is None:
            raise RuntimeError("the online phase scored a rollout before the reward model was fitted")
        return learned_rewards(self.reward_model, self.actors.prompts(row), pairs)

    def comparisons(self, pairs: "PreferenceBatch") -> list[PreferenceText]:
        return comparison_texts(pairs, lambda index: self.actors.prompts(self.rows_by_index[index]))

    def fit(self, pairs: "PreferenceBatch", iteration: int) -> None:
        """Discard any previous reward model, build a fresh one from the base weights and fit it on `pairs`."""
        comparisons = self.comparisons(pairs)
        with self.fresh_reward_model() as model:
            result = fit_reward_model(model, comparisons, self.fit_settings)
        self.run.counts.trained_pairs += result.pairs * self.fit_settings.num_epochs
        self.run.counts.reward_model_updates += result.updates
        if self.tracker is not None:
            self.tracker.log(
                {
                    "train/reward_model_loss": result.mean_loss,
                    "train/reward_model_accuracy": result.train_accuracy,
                    "train/reward_model_pairs": result.pairs,
                    "train/reward_model_iteration": iteration,
                },
                env_step=self.learned_sampler.env_step,
            )

    @contextmanager
    def fresh_reward_model(self) -> Iterator[JointRewardModel]:
        """Discard any previous reward model and build a fresh one from the base weights (the actors parked on
        the CPU meanwhile); it becomes the run's reward model once the body returns."""
        self.reward_model = None
        gc.collect()
        with self.actors.all_on_cpu():
            model = build_reward_model(
                self.load_reward_base,
                device=self.reward_device,
                max_length=self.reward_max_length,
                freeze_backbone=self.freeze_backbone,
                gradient_checkpointing=self.gradient_checkpointing,
                seed=self.run.seed,
            )
            yield model
        release_memory(torch.device(self.reward_device))
        self.reward_model = model

    # -- checkpoints ------------------------------------------------------------------------------------------

    def save_checkpoint_extra(self, directory: Path) -> None:
        """The online loop's checkpoints also keep the preference run's state and the fitted reward model."""

        save_preference_state(self.run, directory)
        if self.reward_model is not None:
            save_plain(self.reward_model.state_dict(), directory / REWARD_MODEL_FILE)

    def restore_checkpoint(self, *, reward_model: bool) -> None:
        """The preference run's state and, when `reward_model`, the reward model of the checkpoint resumed."""

        path = Path(self.resume.path)
        restore_preference_state(self.run, path)
        if reward_model:
            with self.fresh_reward_model() as model:
                model.load_state_dict(load_plain(path / REWARD_MODEL_FILE))
                model.requires_grad_(False)

    # -- the run ----------------------------------------------------------------------------------------------

    def _magrpo(self) -> Any:
        return MAGRPOTrainer(
            algorithm=self.algorithm,
            schedule=self.schedule,
            sampler=self.learned_sampler,
            actors=self.actors,
            evaluator=self.evaluator,
            tracker=self.tracker,
            run_dir=self.run.run_dir,
            progress=self.progress,
            upload_turn_metrics=False,  # preference runs upload eval/* and iter/* only
            checkpoints=self.checkpoints,
            resume=self.resume,
            stop=self.stop,
            checkpoint_extra=self.save_checkpoint_extra,
        )

    def train(self) -> TrainResult:
        if self.resume is None:
            self.run.start()
        try:
            online = self._train_online()
        finally:
            self.learned_sampler.close()
        result = TrainResult(
            env_steps=online.env_steps,
            optimizer_updates=list(online.optimizer_updates),
            evaluations=list(online.evaluations),
            counts=self.run.counts,
        )
        print(format_preference_report(self.run.name, result, self.budget))
        check_against_budget(self.budget, result, len(self.actors.actors))
        return result

    def _train_online(self) -> Any:
        if self.resume is not None:
            self.restore_checkpoint(reward_model=True)
        else:
            collection = self.run.collect(1)
            require_pairs(len(collection.batch), collection.collected_candidates, self.run.name)
            self.fit(collection.batch, 1)
        return self._magrpo().train()


class MARLHFIterTrainer(MARLHFTrainer):
    """num_iterations of: collect with the comparator, replay-sample, refit, then num_train_epochs online epochs."""

    config_class = MARLHFIterConfig

    def refresh(self, iteration: int) -> None:
        """The iteration boundary: checkpoint for the comparator, collect, replay-sample, log, refit."""
        if iteration > 1:
            self.run.end_iteration(iteration - 1)
        collection = self.run.collect(iteration, self.learned_sampler.env_step)
        sample = self.run.training_sample(iteration, len(collection.batch))
        self.run.log_iteration(iteration, self.learned_sampler.env_step, collection, sample)
        # the online phase needs a reward model: with no stored pair at all there is nothing to fit
        require_pairs(len(sample), self.run.counts.collected_candidates, self.run.name)
        self.fit(sample, iteration)

    def _train_online(self) -> Any:
        magrpo = self._magrpo()
        k = self.epochs_per_iteration
        first_epoch, first_row, evaluated = magrpo.start_position
        # a checkpoint at an iteration's first epoch, before its evaluation, was written before its refresh
        refreshed = self.resume is not None and not (first_epoch % k == 0 and first_row == 0 and not evaluated)
        if self.resume is not None:
            self.restore_checkpoint(reward_model=refreshed)
        with magrpo.progress_bar():
            for iteration in range(first_epoch // k + 1, self.run.num_iterations + 1):
                if not (refreshed and iteration == first_epoch // k + 1):
                    self.refresh(iteration)
                for epoch_index in range(max((iteration - 1) * k, first_epoch), iteration * k):
                    resumed = epoch_index == first_epoch
                    magrpo.train_epoch(epoch_index, first_row if resumed else 0, evaluated=resumed and evaluated)
        return magrpo.finish()


def build_marlhf(config: MARLHFConfig, parts: TrainingParts) -> MARLHFTrainer:
    trainer = MARLHFIterTrainer if config.iterative else MARLHFTrainer
    return trainer(
        **preference_trainer_parts(config, parts),
        sampler=parts.sampler,
        model_factory=parts.model_factory,
        gradient_checkpointing=parts.gradient_checkpointing,
    )


for _name, _config in (("marlhf", MARLHFConfig), ("marlhf_iter", MARLHFIterConfig)):
    register(
        AlgorithmSpec(
            _name, _config, budget=marlhf_budget, build_trainer=build_marlhf, checkpoints=True, advantage=group_advantage
        )
    )
