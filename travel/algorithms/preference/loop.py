"""What the four preference trainers share: collection phases, the replay store, iteration logging, evaluation
gating, the all-tied check, the budget check and the final console report.

`PreferenceRun` holds the injected parts (actors, evaluator, tracker, run directory, algorithm options, task
reward, train rows, seed, comparator spec). `collect(iteration)` samples and labels one collection phase
(target actors, plus the comparator in iterative algorithms), stores its pairs as that iteration's replay
shard and returns them; `training_sample(...)` draws the pairs an iteration trains on (lambda-decay replay);
`log_iteration(...)` writes the iteration's reward distributions and iter/* counters.

Counting units: travel/algorithms/core/results.py.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from travel.algorithms.core.registry import spec_for
from travel.algorithms.core.results import BudgetDrift, PreferenceCounts, TrainResult
from travel.algorithms.core.rollout import as_layout
from travel.algorithms.preference.batch import PreferenceBatch
from travel.algorithms.preference.central_teacher import CentralTeacherSource
from travel.algorithms.preference.collection import (
    PolicySource,
    PreferenceCollection,
    PreferenceSettings,
    collect_preferences,
)
from travel.algorithms.preference.comparators import (
    Comparator,
    ComparatorConfigError,
    ComparatorPolicies,
    ComparatorRolePolicy,
)
from travel.algorithms.preference.replay import ReplayStore
from travel.logging.reward_distributions import log_iteration
from travel.reward import DEFAULT_CONFIG, RewardConfig

if TYPE_CHECKING:
    from travel.algorithms.core.budgets import Budget
    from travel.algorithms.core.config import AlgorithmConfig
    from travel.algorithms.core.evaluation import Evaluator
    from travel.algorithms.preference.comparators import ComparatorSpec
    from travel.data.row import TravelRow

REPLAY_DIR = "preference_replay"
CHECKPOINT_DIR = "policy_checkpoints"


class NoPreferencePairs(RuntimeError):
    """Every comparison of the run tied: no pair, so no training happened."""


def require_pairs(pairs: int, collected_candidates: int, algorithm: str) -> None:
    if pairs == 0:
        raise NoPreferencePairs(
            f"no non-tied preference pairs: algorithm={algorithm} collected {collected_candidates} joint candidates "
            f"and every comparison tied, so no training occurred (more candidates, more rows or a longer "
            f"max_new_tokens give the task reward something to rank)"
        )


def format_preference_report(algorithm: str, result: TrainResult, budget: Optional["Budget"] = None) -> str:
    counts = result.counts
    lines = [
        f"{algorithm}: preference training finished",
        f"  collected candidates   {counts.collected_candidates:>8}  (joint candidates sampled to label pairs; not env steps)",
        f"  preference pairs       {counts.preference_pairs:>8}  (new non-tied pairs selected)",
        f"  trained pairs          {counts.trained_pairs:>8}  (pairs consumed by updates, replay included)",
        f"  replayed pairs         {counts.replayed_pairs:>8}  (drawn from an earlier iteration's shard)",
        f"  env steps              {result.env_steps:>8}",
        f"  optimizer updates      {result.optimizer_updates}",
    ]
    if counts.reward_model_updates:
        lines.append(f"  reward-model updates   {counts.reward_model_updates:>8}")
    if budget is not None:
        bound = "at most " if budget.env_steps_is_upper_bound else ""
        lines.append(f"  budget                 {bound}{budget.env_steps} env steps ({budget.env_steps_unit}), "
                     f"{budget.collected_candidates} collected candidates")
    return "\n".join(lines)


def check_against_budget(budget: "Budget", result: TrainResult, num_agents: int = 2) -> None:
    """Exact budget figures must match; upper bounds must hold."""
    problems = []
    if result.counts.collected_candidates != budget.collected_candidates:
        problems.append(f"collected candidates {result.counts.collected_candidates} != {budget.collected_candidates}")
    if result.counts.preference_pairs > budget.preference_pairs_upper_bound:
        problems.append(f"preference pairs {result.counts.preference_pairs} > {budget.preference_pairs_upper_bound}")
    if budget.env_steps_is_upper_bound:
        if result.env_steps > budget.env_steps:
            problems.append(f"env steps {result.env_steps} > {budget.env_steps}")
    elif result.env_steps != budget.env_steps:
        problems.append(f"env steps {result.env_steps} != {budget.env_steps}")
    updates = budget.optimizer_updates_per_agent
    if budget.optimizer_updates_is_upper_bound:
        if any(u > updates for u in result.optimizer_updates):
            problems.append(f"optimizer updates {result.optimizer_updates} > {updates}")
    elif result.optimizer_updates != [updates] * num_agents:
        problems.append(f"optimizer updates {result.optimizer_updates} != {[updates] * num_agents}")
    if budget.eval_env_steps is not None and result.eval_env_steps != budget.eval_env_steps:
        problems.append(f"eval env steps {result.eval_env_steps} != {budget.eval_env_steps}")
    bound = budget.reward_model_updates_upper_bound
    if bound is not None and result.counts.reward_model_updates > bound:
        problems.append(f"reward-model updates {result.counts.reward_model_updates} > {bound}")
    if problems:
        raise BudgetDrift(f"algorithm={budget.algorithm}: training left the dry run's budget: " + "; ".join(problems))


class EvalGate:
    """Periodic anchor evaluations that are skipped when nothing changed since the last one at this env step."""

    def __init__(self, evaluator: "Evaluator"):
        self.evaluator = evaluator
        self._last: Optional[int] = None
        self._dirty = True

    def periodic(self, env_step: int) -> None:
        if not self._dirty and self._last == env_step:
            return
        self.evaluator.periodic(env_step)
        self._last, self._dirty = env_step, False

    def updated(self) -> None:
        """An actor changed: the next evaluation is never a repeat."""
        self._dirty = True

    def terminal(self, env_step: int, run_dir: Optional[Path]) -> None:
        self.evaluator.terminal(env_step, run_dir)

    def state(self) -> dict[str, Any]:
        """The gate and the evaluations so far (what a checkpoint keeps)."""
        return {"last": self._last, "dirty": self._dirty, "evaluations": self.evaluator.history_state()}

    def restore(self, state: dict[str, Any]) -> None:
        self._last, self._dirty = state["last"], bool(state["dirty"])
        self.evaluator.restore_history(state["evaluations"])


def declared_reward_range(reward_config: Any) -> tuple[float, float]:
    """The task reward's declared [min, max] (the distributions' x range), whatever form the config takes."""

    if reward_config is None:
        config = DEFAULT_CONFIG
    elif isinstance(reward_config, RewardConfig):
        config = reward_config
    else:
        config = RewardConfig.from_mapping(reward_config)
    return tuple(config.reward_range)  # type: ignore[return-value]


def preference_trainer_parts(config: "AlgorithmConfig", parts: Any) -> dict[str, Any]:
    """What every preference trainer takes from the run's TrainingParts (travel/algorithms/core/registry.py)."""
    return dict(
        actors=parts.actors,
        evaluator=parts.evaluator,
        algorithm=config,
        reward_config=parts.reward_config,
        train_rows=parts.split.train,
        seed=parts.seed,
        tracker=parts.tracker,
        run_dir=parts.run_dir,
        comparator_spec=parts.comparator_spec,
        score=parts.score,
        checkpoints=parts.checkpoints,
        resume=parts.resume,
        stop=parts.stop,
    )


def load_comparator_model(name: str, device: Any) -> tuple[Any, Any]:
    """comparator=model: a frozen causal LM and its tokenizer from a hub id or local directory."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name)
    model = AutoModelForCausalLM.from_pretrained(name, dtype="auto").to(device)  # the checkpoint's own dtype
    return model, tokenizer


def load_comparator_tokenizer(name: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(name)


class PreferenceRun:
    """The injected parts of a preference run and the collection/replay/logging steps the trainers share."""

    def __init__(
        self,
        *,
        actors: Any,
        evaluator: "Evaluator",
        tracker: Any,
        run_dir: Optional[str | Path],
        algorithm: "AlgorithmConfig",
        reward_config: Any,
        train_rows: Sequence["TravelRow"],
        seed: int,
        comparator_spec: Optional["ComparatorSpec"] = None,
        score: Optional[Callable[..., Any]] = None,
        comparator_loaders: Optional[tuple[Callable[..., Any], Callable[..., Any]]] = None,
        progress: bool = True,
    ):
        if not train_rows:
            raise ValueError("curriculum.train_per_cell=0: preference collection needs train rows")
        self.actors = actors
        self.evaluator = evaluator
        self.tracker = tracker
        self.run_dir = Path(run_dir) if run_dir is not None else Path("outputs") / "unnamed"
        self.algorithm = algorithm
        self.name = algorithm.name
        self.reward_config = reward_config
        self.train_rows = tuple(train_rows)
        self.seed = int(seed)
        self.score = score
        self.progress = progress
        self.iterative = algorithm.iterative
        self.num_iterations = algorithm.num_iterations if self.iterative else 1  # type: ignore[attr-defined]
        self.settings = PreferenceSettings.from_config(algorithm)
        self.batch_size = algorithm.preference_generation_batch_size  # type: ignore[attr-defined]
        self.target = PolicySource(actors, self.batch_size)
        self.replay = ReplayStore(self.run_dir / REPLAY_DIR, self.target.kind)
        self.rng = random.Random(self.seed)
        self.counts = PreferenceCounts()
        self.comparator: Optional["Comparator"] = None
        if self.iterative:
            self.comparator = self._comparator(comparator_spec, comparator_loaders)

    # -- comparator ---------------------------------------------------------------------------------------------

    def _comparator(self, spec: Optional["ComparatorSpec"], loaders) -> "Comparator":
        if spec is None or not spec.active:
            raise ComparatorConfigError(
                f"algorithm={self.name} compares the actors with a comparator each iteration: use "
                f"comparator=current_copy (the default), history1 or model"
            )
        load_model, load_tokenizer = loaders or (load_comparator_model, load_comparator_tokenizer)
        return Comparator(
            spec,
            seed=self.seed,
            actor_devices=[actor.device for actor in self.actors.actors],
            checkpoint_dir=self.run_dir / CHECKPOINT_DIR,
            load_model=load_model,
            load_tokenizer=load_tokenizer,
        )

    @property
    def actor_models(self) -> list[Any]:
        return [actor.model for actor in self.actors.actors]

    def start(self) -> None:
        if self.comparator is not None:
            self.comparator.start(self.actor_models)

    def end_iteration(self, iteration: int) -> None:
        """Checkpoint the actors for a later history comparator (nothing after the last iteration)."""
        if self.comparator is not None and iteration < self.num_iterations:
            self.comparator.end_iteration(iteration, self.actor_models)

    # -- collection ---------------------------------------------------------------------------------------------

    def _progress(self, label: str) -> Callable[[int, int], None]:
        def report(done: int, total: int) -> None:
            if self.progress and (done == total or done % 10 == 0):
                print(f"{label}: {done}/{total} rows", flush=True)

        return report

    def collect(self, iteration: int, env_step: int = 0) -> PreferenceCollection:
        """One collection phase: candidates, labels, pairs; the pairs become iteration `iteration`'s shard.
        Its wall time goes to metrics.jsonl (time/collection_s) at `env_step`."""
        started = time.perf_counter()
        label = f"{self.name} preference collection" + (f" (iteration {iteration})" if self.iterative else "")
        common = dict(reward_config=self.reward_config, score=self.score, iteration=iteration, on_row=self._progress(label))
        if self.comparator is None:
            collection = collect_preferences(self.train_rows, self.target, self.settings, **common)
        else:
            tokenizers = [actor.tokenizer for actor in self.actors.actors]
            with self.comparator.collection(iteration, self.actor_models, tokenizers) as policies:
                source = comparator_source(self.actors, policies, self.batch_size, self.comparator.spec)
                collection = collect_preferences(self.train_rows, self.target, self.settings, comparator=source, **common)
        self.replay.write(iteration, collection.batch)
        if self.tracker is not None:
            self.tracker.log({"time/collection_s": time.perf_counter() - started}, env_step=env_step)
        self.counts.collected_candidates += collection.collected_candidates
        self.counts.preference_pairs += len(collection.batch)
        self.counts.iterations = max(self.counts.iterations, iteration)
        return collection

    def training_sample(self, iteration: int, new_pairs: int) -> PreferenceBatch:
        """The pairs iteration `iteration` trains on, drawn from every stored shard (lambda-decay by default)."""
        config = self.algorithm
        sample = self.replay.sample(
            new_pairs,
            self.rng,
            config.preference_replay_mode,  # type: ignore[attr-defined]
            config.preference_replay_lambda,  # type: ignore[attr-defined]
            size=config.preference_replay_sample_size,  # type: ignore[attr-defined]
        )
        self.counts.replayed_pairs += sum(pair.iteration < iteration for pair in sample)
        return sample

    def log_iteration(self, iteration: int, env_step: int, collection: PreferenceCollection, sample: PreferenceBatch) -> None:
        """iter/* counters and, with algorithm.log_reward_distribution, the iteration's reward distributions."""
        if self.tracker is None:
            return

        log_iteration(
            self.tracker,
            env_step=env_step,
            iteration=iteration,
            new_pairs=len(collection.batch),
            total_pairs=self.replay.total_pairs,
            selected=sample,
            target_rewards=collection.target_rewards,
            comparator_rewards=collection.comparator_rewards,
            reward_range=declared_reward_range(self.reward_config),
            run_dir=self.run_dir,
            log_distribution=self.algorithm.log_reward_distribution,  # type: ignore[attr-defined]
        )

    def budget(self) -> "Budget":
        """The dry run's budget for this algorithm over these train rows (raises BudgetError on bad options)."""

        return spec_for(self.algorithm).budget(self.algorithm, TrainRows(self.train_rows), 0)


@dataclass(frozen=True)
class TrainRows:
    """The part of a curriculum split the preference budget and MARLHF's online schedule read."""

    train: tuple[Any, ...]


def comparator_source(
    layout: Any, policies: ComparatorPolicies, batch_size: int, spec: Optional[ComparatorSpec] = None
) -> Any:
    """The JointSource of one collection phase's comparator (travel.algorithms.preference.collection): one call per policy
    of the actors' layout (two role actors, or the joint actor), or the central teacher when decentralized
    actors use generation_mode=centralized."""
    layout = as_layout(layout)
    if spec is not None and spec.generation_mode == "centralized" and not layout.joint:
        index = spec.teacher_agent_index
        return CentralTeacherSource(layout.actors, policies.models[index], policies.generators[index], batch_size, index)
    acting = [ComparatorRolePolicy(actor, policies.models[i], policies.generators[i]) for i, actor in enumerate(layout.actors)]
    return PolicySource(layout, batch_size, policies=acting)
