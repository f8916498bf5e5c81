"""MAGRPO: K aligned joint actions per prompt, group-relative advantages, one AdamW step per agent per
buffer of prompts, on the masked, length-normalised value-token loss.

The trainer walks `schedule.epochs()` (the same object the dry run reports), evaluates the anchor panel
at the start of every `eval_every_epochs`-th epoch and the whole eval pool at the end, and checks when
it finishes that the env steps, optimizer updates and evaluation points it produced are exactly the
schedule's. Reference KL is not used: schema tokens carry no loss, so a KL over them would be noise.
"""

from __future__ import annotations

import math
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence

from tqdm.auto import tqdm

from travel.algorithms.core.budgets import magrpo_budget, magrpo_schedule
from travel.algorithms.core.config import ADVANTAGE_MODES, AlgorithmConfig, OnlineOptions
from travel.algorithms.core.registry import (
    AdvantageEstimator,
    AlgorithmSpec,
    TrainingParts,
    advantage_estimator,
    register,
)
from travel.algorithms.core.results import BudgetDrift, TrainResult
from travel.checkpoint.store import checkpoint_point

if TYPE_CHECKING:
    from travel.algorithms.core.evaluation import Evaluator
    from travel.algorithms.core.rollout import JointRollout, JointRolloutSampler
    from travel.algorithms.core.schedule import TrainingSchedule
    from travel.generation.requests import Candidate

NORMALISATION_EPS = 1e-6


def group_advantages(rewards: Sequence[float], mode: str = "mean", normalize: bool = False) -> list[float]:
    """Advantages of the K joint actions of one prompt.

    mean: r - mean(r); raw: r; max: r - max(r); rloo: r - mean of the other K-1 rewards. With `normalize`
    the group is divided by its population standard deviation (floored at 1e-6).
    """
    if mode not in ADVANTAGE_MODES:
        raise ValueError(f"algorithm.advantage_mode={mode!r}: choose one of {', '.join(ADVANTAGE_MODES)}")
    values = [float(r) for r in rewards]
    if not values:
        raise ValueError("no rewards to compute advantages from")
    k = len(values)
    if mode == "mean":
        mean = math.fsum(values) / k
        advantages = [r - mean for r in values]
    elif mode == "raw":
        advantages = list(values)
    elif mode == "max":
        best = max(values)
        advantages = [r - best for r in values]
    else:
        if k < 2:
            raise ValueError("algorithm.advantage_mode=rloo needs at least 2 generations")
        total = math.fsum(values)
        advantages = [r - (total - r) / (k - 1) for r in values]
    if normalize:
        std = max(statistics.pstdev(values), NORMALISATION_EPS)
        advantages = [a / std for a in advantages]
    return advantages


def group_advantage(config: OnlineOptions) -> Callable[[Sequence[float]], list[float]]:
    """MAGRPO's advantage estimator (the registry's `advantage` hook): `group_advantages` with the config's
    advantage_mode and advantage_normalization."""
    mode, normalize = config.advantage_mode, config.advantage_normalization
    return lambda rewards: group_advantages(rewards, mode, normalize)


@dataclass(frozen=True)
class BufferSample:
    """One prompt's K candidates of one agent with their advantages."""

    prompt_ids: Sequence[int]
    candidates: tuple["Candidate", ...]
    advantages: tuple[float, ...]
    reward_mean: float
    env_step: int


@dataclass(frozen=True)
class UpdateStep:
    loss: float  # the buffer's loss value
    grad_norm: float  # the L2 norm of the accumulated gradient before the step (0 where nothing was scored)


def value_loss_step(actor: Any, samples: Sequence[BufferSample], *, packed: bool = True, split_prompt: bool = True) -> UpdateStep:
    """One AdamW step of `actor` on a buffer: for each prompt, the mean over its candidates with at least one
    value token of -(length-normalised value log-prob) x advantage, averaged over the buffer's prompts.

    Candidates with a zero advantage contribute nothing, so they are not run through the model (the mean
    still counts them); a prompt whose K rewards are all equal costs no forward pass. A prompt's kept
    candidates share one packed forward that carries the prompt once (`packed=False`: one padded sequence
    per candidate, the same values at K times the prompt's compute). Gradients are accumulated one prompt
    at a time. `split_prompt`: see `shared_prompt_value_logprobs`. Returns the loss value and the gradient's norm.
    """
    import torch

    # deferred: the losses load transformers; a dry run imports this module without them
    from travel.algorithms.core.losses import advantage_weighted_loss, shared_prompt_value_logprobs

    model, optimizer = actor.model, actor.optimizer
    optimizer.zero_grad(set_to_none=True)
    was_training = model.training
    model.train()
    total = 0.0
    try:
        for sample in samples:
            counts = [int(torch.as_tensor(c.value_mask).sum()) for c in sample.candidates]
            scored = sum(count > 0 for count in counts)
            keep = [k for k, count in enumerate(counts) if count > 0 and sample.advantages[k] != 0.0]
            if not keep:
                continue
            logprobs, token_counts = shared_prompt_value_logprobs(
                model,
                sample.prompt_ids,
                [sample.candidates[k].token_ids for k in keep],
                [sample.candidates[k].value_mask for k in keep],
                return_counts=True,
                packed=packed,
                split_prompt=split_prompt,
            )
            advantages = [sample.advantages[k] for k in keep]
            # advantage_weighted_loss averages over the kept candidates; rescale to the mean over all scored ones
            loss = advantage_weighted_loss(logprobs, advantages, token_counts) * (len(keep) / scored) / len(samples)
            loss.backward()
            total += float(loss.detach())
        gradients = [p.grad for p in model.parameters() if p.grad is not None]
        grad_norm = float(torch.nn.utils.get_total_norm(gradients)) if gradients else 0.0
        optimizer.step()
    finally:
        optimizer.zero_grad(set_to_none=True)
        model.train(was_training)
    return UpdateStep(total, grad_norm)


class MAGRPOTrainer:
    """Runs the MAGRPO loop over a schedule. `actors` updates its agents through `update_each(step_fn)`;
    the rollout seam, evaluator and tracker are injected so tests can script any of them."""

    def __init__(
        self,
        *,
        algorithm: OnlineOptions,
        schedule: "TrainingSchedule",
        sampler: "JointRolloutSampler",
        actors: Any,
        evaluator: "Evaluator",
        advantage: Optional[AdvantageEstimator] = None,
        tracker: Any = None,
        run_dir: Optional[str | Path] = None,
        progress: bool = True,
        upload_turn_metrics: bool = True,
        checkpoints: Any = None,
        resume: Any = None,
        stop: Any = None,
        checkpoint_extra: Optional[Callable[[Path], None]] = None,
    ):
        """`algorithm` is the typed config of the algorithm whose online phase this is (its name goes into the
        checkpoints); `advantage` estimates each group's advantages (default: the algorithm's registered
        `advantage` hook). `checkpoints` (travel.checkpoint.store.CheckpointStore) writes checkpoints at each
        anchor evaluation (or every checkpoint.every_env_steps, at buffer boundaries); `resume` (a Checkpoint
        already restored into the actors) sets where the loop continues; `stop`
        (travel.checkpoint.signals.StopRequest) asks for a checkpoint and an exit at the next buffer boundary
        (SIGTERM); `checkpoint_extra(directory)` writes what a driver of this loop (MARLHF) keeps in each
        checkpoint beyond the loop's own state."""
        self.algorithm = algorithm
        self.advantage = advantage if advantage is not None else advantage_estimator(algorithm)
        self.schedule = schedule
        self.sampler = sampler
        self.actors = actors
        self.evaluator = evaluator
        self.tracker = tracker
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.logging_steps = algorithm.logging_steps
        self.progress = progress
        # MAGRPO uploads turn_1/*; the preference runs (MARLHF online phase) keep them in metrics.jsonl only
        self.upload_turn_metrics = upload_turn_metrics
        self.epochs = schedule.epochs()
        self.num_agents = len(actors.actors)  # trainable policies: two role actors, or one joint actor
        self.optimizer_updates = [0] * self.num_agents
        self._buffer: list[tuple["JointRollout", list[float]]] = []
        self._last_turn_log: Optional[int] = None
        self.checkpoints, self.stop, self.checkpoint_extra = checkpoints, stop, checkpoint_extra
        self.start_position = (0, 0, False)  # (epoch, first row of its next buffer, whether its evaluation is done)
        if resume is not None:
            self.restore_state(resume.trainer)

    # -- the loop -------------------------------------------------------------------------------------------------

    def train(self) -> TrainResult:
        first_epoch, first_row, evaluated = self.start_position
        with self.progress_bar():
            for epoch_index in range(first_epoch, len(self.epochs)):
                resumed = epoch_index == first_epoch
                self.train_epoch(epoch_index, first_row if resumed else 0, evaluated=resumed and evaluated)
        return self.finish()

    # -- checkpoints -------------------------------------------------------------------------------------------------

    def checkpoint_state(self, epoch_index: int, row_start: int, evaluated: bool) -> dict[str, Any]:
        """Where the loop continues (the buffer at `row_start` of epoch `epoch_index`, after the epoch's anchor
        evaluation when `evaluated`) and what it has counted."""
        return {
            "trainer": self.algorithm.name,
            "advantage": self.advantage.state_dict() if hasattr(self.advantage, "state_dict") else None,
            "epoch": epoch_index,
            "row_start": row_start,
            "evaluated": evaluated,
            "env_step": self.sampler.env_step,
            "optimizer_updates": list(self.optimizer_updates),
            "last_turn_log": self._last_turn_log,
            "evaluations": self.evaluator.history_state(),
        }

    def restore_state(self, state: dict[str, Any]) -> None:
        if state.get("trainer") != self.algorithm.name:
            raise ValueError(f"a {state.get('trainer')!r} checkpoint cannot resume the online loop of {self.algorithm.name!r}")
        if state.get("advantage") is not None:
            self.advantage.load_state_dict(state["advantage"])
        self.start_position = (int(state["epoch"]), int(state["row_start"]), bool(state["evaluated"]))
        self.sampler.env_step = int(state["env_step"])
        self.optimizer_updates = [int(n) for n in state["optimizer_updates"]]
        self._last_turn_log = state["last_turn_log"]
        self.evaluator.restore_history(state["evaluations"])

    def _checkpoint(self, epoch_index: int, row_start: int, at_eval_point: bool) -> None:
        """A checkpoint when one is due here (travel.checkpoint.store.checkpoint_point); at an evaluation point
        the epoch's evaluation is done, at a buffer boundary mid-epoch too."""

        def save() -> Path:
            state = self.checkpoint_state(epoch_index, row_start, evaluated=at_eval_point or row_start > 0)
            return self.checkpoints.save(self.sampler.env_step, self.actors, state, self.tracker, extra=self.checkpoint_extra)

        checkpoint_point(self.checkpoints, self.stop, self.sampler.env_step, at_eval_point, save)

    @contextmanager
    def progress_bar(self) -> Iterator[None]:
        """The env-step bar that `train_epoch` advances; a driver that runs its own loop (MARLHF-iter) opens it."""
        self._bar = tqdm(
            total=self.schedule.env_steps,
            initial=self.sampler.env_step,
            desc="train env steps",
            unit="step",
            disable=not self.progress,
        )
        try:
            yield
        finally:
            self._bar.close()

    def train_epoch(self, epoch_index: int, first_row: int = 0, evaluated: bool = False) -> None:
        """One epoch of the schedule: its anchor evaluation when due (unless a resumed epoch did it), then its
        buffers from `first_row` on, one update per buffer; checkpoints where they are due."""
        phase, rows = self.epochs[epoch_index]
        schedule = self.schedule
        if first_row == 0 and not evaluated and epoch_index % schedule.eval_every_epochs == 0:
            self.evaluator.periodic(self.sampler.env_step)
            self._checkpoint(epoch_index, 0, at_eval_point=True)
        # A buffer's rows are sampled by the same weights, so they are sampled together.
        size = schedule.rollout_buffer_size
        for start in range(first_row, len(rows), size):
            for rollout in self.sampler.rollouts(rows[start : start + size], schedule.num_generations):
                advantages = self.advantage(rollout.rewards)
                self._buffer.append((rollout, advantages))
                self._bar.update(rollout.num_joint_actions)
            self._bar.set_postfix(epoch=f"{epoch_index + 1}/{len(self.epochs)}", phase=phase, refresh=False)
            self._process_buffer(phase)
            following = (epoch_index, start + size) if start + size < len(rows) else (epoch_index + 1, 0)
            if following[0] < len(self.epochs) or (self.stop is not None and self.stop.requested):
                self._checkpoint(*following, at_eval_point=False)  # after the last buffer: on a stop request only

    def finish(self) -> TrainResult:
        """The terminal evaluation, and the check that the run's counts are the schedule's."""
        self.evaluator.terminal(self.sampler.env_step, self.run_dir)
        result = TrainResult(
            env_steps=self.sampler.env_step,
            optimizer_updates=list(self.optimizer_updates),
            evaluations=list(self.evaluator.history),
            epochs=len(self.epochs),
        )
        self._check_against_schedule(result)
        return result

    def _check_against_schedule(self, result: TrainResult) -> None:
        expected = (
            self.schedule.env_steps,
            [self.schedule.optimizer_updates_per_agent] * self.num_agents,
            self.schedule.eval_env_steps(),
        )
        actual = (result.env_steps, result.optimizer_updates, result.eval_env_steps)
        if actual != expected:
            raise BudgetDrift(
                f"training produced (env steps, updates per agent, eval env steps) = {actual}, "
                f"but the schedule predicts {expected}"
            )

    # -- one buffer -------------------------------------------------------------------------------------------------

    def _agent_samples(self, agent_id: int) -> list[BufferSample]:
        return [
            BufferSample(
                prompt_ids=rollout.agents[agent_id].prompt_ids,
                candidates=rollout.agents[agent_id].candidates,
                advantages=tuple(advantages),
                reward_mean=statistics.fmean(rollout.rewards),
                env_step=rollout.env_step,
            )
            for rollout, advantages in self._buffer
        ]

    def _process_buffer(self, phase: str) -> None:
        samples = [self._agent_samples(agent_id) for agent_id in range(self.num_agents)]
        started = time.perf_counter()
        steps = self.actors.update_each(lambda actor: value_loss_step(actor, samples[actor.agent_id]))
        update_seconds = time.perf_counter() - started
        for agent_id in range(self.num_agents):
            self.optimizer_updates[agent_id] += 1
        self._log_buffer(samples[0], steps, phase, update_seconds)
        self._buffer.clear()

    def _log_buffer(
        self, samples: list[BufferSample], steps: Sequence[UpdateStep], phase: str, update_seconds: float
    ) -> None:
        env_step = max(sample.env_step for sample in samples)
        reward_mean = statistics.fmean(sample.reward_mean for sample in samples)
        rewards = [rollout.rewards for rollout, _ in self._buffer]
        advantages = [a for _, group in self._buffer for a in group]
        record: dict[str, Any] = {
            "train/reward": reward_mean,
            "train/reward_group_std": statistics.fmean(statistics.pstdev(group) for group in rewards),
            "train/nonzero_advantage_rate": sum(abs(a) > 1e-6 for a in advantages) / len(advantages),
            "train/distinct_candidate_share": statistics.fmean(
                len({rollout.joint_texts(k) for k in range(rollout.num_joint_actions)}) / rollout.num_joint_actions
                for rollout, _ in self._buffer
            ),
            **self._entropy_estimates(),
            "train/curriculum_stage": 0 if phase == "short" else 1,
            **{f"train/loss_agent_{agent_id}": step.loss for agent_id, step in enumerate(steps)},
            **{f"train/grad_norm_agent_{agent_id}": step.grad_norm for agent_id, step in enumerate(steps)},
            **self._buffer_timing(update_seconds),
        }
        if self._turn_log_due(env_step):
            # single turn: the return of a joint action is its reward
            record.update({"turn_1/reward_mean": reward_mean, "turn_1/expected_return": reward_mean})
            self._last_turn_log = env_step
        if self.tracker is not None:
            self.tracker.log(record, env_step=env_step, upload=self.upload_turn_metrics)

    def _entropy_estimates(self) -> dict[str, float]:
        """Per agent, minus the mean length-normalised log-prob of its sampled candidates: a Monte-Carlo estimate
        of the policy's per-value-token entropy (when the sampler reports log-probs)."""
        estimates = {}
        for agent_id in range(self.num_agents):
            logprobs = [getattr(c, "logprob", None) for rollout, _ in self._buffer for c in rollout.agents[agent_id].candidates]
            if logprobs and all(isinstance(value, float) for value in logprobs):
                estimates[f"train/policy_entropy_agent_{agent_id}"] = -statistics.fmean(logprobs)
        return estimates

    def _buffer_timing(self, update_seconds: float) -> dict[str, float]:
        """Seconds per env step of this buffer, split into generation, reward and update (metrics.jsonl only),
        and the peak GPU memory so far."""
        import torch

        env_steps = sum(rollout.num_joint_actions for rollout, _ in self._buffer)
        timing = {
            "time/generation_s_per_env_step": sum(r.generation_seconds for r, _ in self._buffer) / env_steps,
            "time/reward_s_per_env_step": sum(r.reward_seconds for r, _ in self._buffer) / env_steps,
            "time/update_s_per_env_step": update_seconds / env_steps,
        }
        if torch.cuda.is_available():
            timing["memory/peak_gpu_gib"] = max(
                torch.cuda.max_memory_allocated(device) for device in range(torch.cuda.device_count())
            ) / 2**30
        return timing

    def _turn_log_due(self, env_step: int) -> bool:
        if self._last_turn_log is None:
            return True
        return env_step > self._last_turn_log and env_step - self._last_turn_log >= self.logging_steps


@dataclass(frozen=True)
class MAGRPOConfig(OnlineOptions, AlgorithmConfig):
    """conf/algorithm/magrpo.yaml."""

    name: str = "magrpo"
    num_train_epochs: int = 25
    use_short_phase: bool = True


def build_magrpo(config: MAGRPOConfig, parts: TrainingParts) -> MAGRPOTrainer:
    return MAGRPOTrainer(
        algorithm=config,
        schedule=magrpo_schedule(config, parts.split, parts.short_epochs),
        sampler=parts.sampler,
        actors=parts.actors,
        evaluator=parts.evaluator,
        tracker=parts.tracker,
        run_dir=parts.run_dir,
        checkpoints=parts.checkpoints,
        resume=parts.resume,
        stop=parts.stop,
    )


register(
    AlgorithmSpec(
        "magrpo", MAGRPOConfig, budget=magrpo_budget, build_trainer=build_magrpo, checkpoints=True, advantage=group_advantage
    )
)
