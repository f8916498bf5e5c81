"""Preference collection and pair selection for MADPO, MARLHF and their iterative versions.

Per train row the target actors (and, in iterative methods, the comparator) sample aligned joint candidates
in generation batches; the shared task reward scores every joint candidate; pairs are selected by
`reward_gap` (all ordered pairs with r_i > r_j, widest gap first) or `comparator_reward` (target[i] against
comparator[i]). Ties give no pair. Candidates are addressed by (pool, index), never by text: two candidates
with the same text but different token ids stay distinct.

Every pair keeps the exact generated token ids and 0/1 value masks of every trained policy for winner and
loser (the continuation only: the assistant prefill lives in the prompt, forced schema tokens are 0 in the
mask, the final token is kept), and the batch keeps each row's prompt ids once. Labels come from the task
reward over the two role actions only; rows carry no annotated plan (travel.data.normalise drops it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import zip_longest
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Sequence

from travel.algorithms.core.config import PAIR_SELECTIONS
from travel.algorithms.core.rollout import JointRolloutSampler
from travel.algorithms.preference.batch import (
    COMPARATOR,
    TARGET,
    CandidateRef,
    JointCandidate,
    PreferenceBatch,
    PreferenceError,
    PreferencePair,
    TokenIds,
    TokenSequence,
    int_tuple,
)
from travel.reward import score_joint_actions

if TYPE_CHECKING:
    from travel.algorithms.core.rollout import Policy, ScoreFn
    from travel.data.row import TravelRow
    from travel.generation.requests import Candidate


# ---- pair selection -------------------------------------------------------------------------------


def select_reward_gap(rewards: Sequence[float], keep: int) -> list[tuple[int, int]]:
    """(winner, loser) index pairs: every ordered pair with r_w > r_l, widest gap first, at most `keep`.
    Equal gaps keep enumeration order (winner index, then loser index)."""
    ordered = [(i, j) for i in range(len(rewards)) for j in range(len(rewards)) if rewards[i] > rewards[j]]
    ordered.sort(key=lambda pair: rewards[pair[0]] - rewards[pair[1]], reverse=True)
    return ordered[:keep]


def select_comparator_reward(
    target: Sequence[float], comparator: Sequence[float], keep: int
) -> list[tuple[CandidateRef, CandidateRef]]:
    """target[i] against comparator[i]; ties skipped; the higher reward wins; ordered by (comparator reward,
    gap) descending, equal keys by index; at most `keep`."""
    scored = []
    for i in range(min(len(target), len(comparator))):
        t, c = target[i], comparator[i]
        if t == c:
            continue
        own, other = CandidateRef(TARGET, i), CandidateRef(COMPARATOR, i)
        scored.append(((c, abs(t - c)), (own, other) if t > c else (other, own)))
    scored.sort(key=lambda item: item[0], reverse=True)
    return [pair for _, pair in scored[:keep]]


def select_pairs(
    selection: str, target: Sequence[float], comparator: Sequence[float], keep: int
) -> list[tuple[CandidateRef, CandidateRef]]:
    """Pairs of one row as (winner, loser) references. reward_gap ranks the union of both pools."""
    if keep < 1:
        raise PreferenceError(f"algorithm.preference_pairs_per_sample={keep}: must be >= 1")
    if selection == "comparator_reward":
        if not comparator:
            raise PreferenceError("algorithm.pair_selection=comparator_reward needs comparator candidates")
        return select_comparator_reward(target, comparator, keep)
    if selection == "reward_gap":
        refs = [CandidateRef(TARGET, i) for i in range(len(target))]
        refs += [CandidateRef(COMPARATOR, i) for i in range(len(comparator))]
        pairs = select_reward_gap([*target, *comparator], keep)
        return [(refs[winner], refs[loser]) for winner, loser in pairs]
    raise PreferenceError(f"algorithm.pair_selection={selection!r}: choose one of {', '.join(PAIR_SELECTIONS)}")


# ---- candidate sources ----------------------------------------------------------------------------


class JointSource(Protocol):
    """Samples aligned joint candidates of one row; `prompt_ids` are the trained policies' prompts."""

    kind: str

    def prompt_ids(self, row: "TravelRow") -> tuple[TokenIds, ...]: ...

    def sample(self, row: "TravelRow", num_candidates: int) -> list[JointCandidate]: ...


def generation_chunks(total: int, batch_size: int) -> list[int]:
    """Sizes of the generation calls for `total` candidates: full batches, then the remainder."""
    if batch_size < 1:
        raise PreferenceError(f"algorithm.preference_generation_batch_size={batch_size}: must be >= 1")
    return [min(batch_size, total - start) for start in range(0, total, batch_size)]


class PolicySource(JointRolloutSampler):
    """Joint candidates from a layout's policies (travel/agents/layouts.py) through the rollout seam's sampler:
    each policy samples under its own prompt in generation calls of at most `batch_size`
    (algorithm.preference_generation_batch_size); candidate k of every policy is joint candidate k, whose role
    texts the layout gives (two role actions, or the split joint action) and whose token sequences are each
    policy's exact tokens. `policies` samples in place of the layout's actors (a comparator's, one per actor).
    Labels are scored by `collect_row_pairs` with the run's score function. Bad candidates are PreferenceErrors."""

    def __init__(self, layout: Any, batch_size: int, policies: Optional[Sequence["Policy"]] = None):
        generation_chunks(1, batch_size)
        super().__init__(layout, candidates_per_call=batch_size, acting=policies)  # a list of two: decentralized
        self.batch_size = batch_size
        self.kind = self.layout.kind

    def prompt_ids(self, row: "TravelRow") -> tuple[TokenIds, ...]:
        return tuple(
            int_tuple(p.prompt_ids(row), f"row {row.source_index}, agent {a} prompt")
            for a, p in enumerate(self.policies)
        )

    def _check_call(self, policy: "Policy", row: "TravelRow", returned: int, expected: int) -> None:
        if returned != expected:
            raise PreferenceError(
                f"row {row.source_index}, agent {policy.agent_id}: a generation call returned {returned} "
                f"candidates, expected {expected}"
            )

    def _check_candidates(self, policy: "Policy", row: "TravelRow", candidates: Sequence["Candidate"], expected: int) -> None:
        """Counts are checked per call; token ids and masks when the joint candidates are built."""

    def sample(self, row: "TravelRow", num_candidates: int) -> list[JointCandidate]:
        (agents,) = self.sample_agents([row], num_candidates)
        return self.joint_candidates(row, [agent.candidates for agent in agents])

    def joint_candidates(self, row: "TravelRow", per_policy: Sequence[Sequence["Candidate"]]) -> list[JointCandidate]:
        """Joint candidate k from candidate k of every policy."""
        joint = []
        for k, candidates in enumerate(zip(*per_policy)):
            where = f"row {row.source_index}, candidate {k}"
            joint.append(
                JointCandidate(
                    texts=self.layout.role_actions([str(candidate.text) for candidate in candidates]),
                    sequences=tuple(
                        TokenSequence.of(c.token_ids, c.value_mask, f"{where}, agent {a}") for a, c in enumerate(candidates)
                    ),
                )
            )
        return joint

    def shares_calls_with(self, comparator: Optional["JointSource"]) -> bool:
        """Whether every comparator policy samples through this source's decoder of the same policy (a
        current_copy comparator on the actors' devices) with a random stream of its own, so that a row's
        target and comparator candidates can come from the same decoder calls."""
        if not isinstance(comparator, PolicySource) or comparator.layout is not self.layout:
            return False
        return all(
            getattr(theirs, "decoder", None) is getattr(own, "decoder", False)
            and hasattr(own, "sample_streams")
            and getattr(own, "generator", None) is not None
            and getattr(theirs, "generator", None) not in (None, own.generator)
            for own, theirs in zip(self.policies, comparator.policies)
        )

    def sample_with(
        self, comparator: "PolicySource", row: "TravelRow", num_candidates: int, comparator_candidates: int
    ) -> tuple[list[JointCandidate], list[JointCandidate]]:
        """A row's target and comparator candidates from shared decoder calls (`shares_calls_with`): call i of a
        policy holds the target's i-th generation batch and the comparator's i-th, each drawn from its own
        random stream, so both are the candidates that separate calls would give, over one prompt fill."""
        calls = list(zip_longest(
            generation_chunks(num_candidates, self.batch_size),
            generation_chunks(comparator_candidates, comparator.batch_size),
            fillvalue=0,
        ))
        targets, comparators = [], []
        for own, theirs in zip(self.policies, comparator.policies):
            generators = (own.generator, theirs.generator)  # type: ignore[attr-defined]
            sampled: tuple[list[Any], list[Any]] = ([], [])
            for sizes in calls:
                streams = [(size, generator) for size, generator in zip(sizes, generators) if size]
                candidates = own.sample_streams(row, streams)  # type: ignore[attr-defined]
                self._check_call(own, row, len(candidates), sum(sizes))
                sampled[0].extend(candidates[: sizes[0]])
                sampled[1].extend(candidates[sizes[0] :])
            targets.append(sampled[0])
            comparators.append(sampled[1])
        return self.joint_candidates(row, targets), comparator.joint_candidates(row, comparators)


# ---- collection -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreferenceSettings:
    num_candidates: int = 20
    comparator_num_candidates: int = 0  # 0: no comparator (non-iterative methods)
    pairs_per_sample: int = 6
    pair_selection: str = "reward_gap"
    shared_comparator_calls: bool = True  # target and comparator candidates in the same decoder calls, where they can

    @classmethod
    def from_config(cls, config: Any) -> "PreferenceSettings":
        """From a preference algorithm's typed config (travel.algorithms.core.config.CollectionOptions)."""
        return cls(
            config.preference_num_candidates,
            config.comparator_candidates,
            config.preference_pairs_per_sample,
            config.pair_selection,
            bool(getattr(config, "shared_comparator_calls", False)),
        )


@dataclass(frozen=True)
class PreferenceCollection:
    """One collection phase: the selected pairs and every candidate's raw reward (for distributions)."""

    batch: PreferenceBatch
    target_rewards: tuple[float, ...]
    comparator_rewards: tuple[float, ...]
    collected_candidates: int  # joint candidates sampled, target plus comparator
    rows_without_pairs: tuple[int, ...]  # source indices of rows whose candidates all tied


def _default_score(row, pairs, config):
    return score_joint_actions(row, pairs, config)


def _scored(row: "TravelRow", candidates: list[JointCandidate], score: ScoreFn, reward_config: Any) -> list[float]:
    if not candidates:
        return []
    results = score(row, [c.texts for c in candidates], reward_config)
    if len(results) != len(candidates):
        raise PreferenceError(
            f"row {row.source_index}: the reward scored {len(results)} of {len(candidates)} candidates"
        )
    return [float(r.reward) for r in results]


def collect_row_pairs(
    row: "TravelRow",
    target: JointSource,
    settings: PreferenceSettings,
    *,
    comparator: Optional[JointSource] = None,
    reward_config: Any = None,
    score: Optional[ScoreFn] = None,
    iteration: int = 0,
) -> tuple[list[PreferencePair], list[float], list[float]]:
    """The selected pairs of one row, with the raw rewards of its target and comparator candidates."""
    score = score or _default_score
    if settings.comparator_num_candidates and comparator is None:
        raise PreferenceError("comparator candidates requested but no comparator source was given")
    shared = isinstance(target, PolicySource) and target.shares_calls_with(comparator)
    if settings.comparator_num_candidates and settings.shared_comparator_calls and shared:
        pools = dict(zip((TARGET, COMPARATOR), target.sample_with(
            comparator, row, settings.num_candidates, settings.comparator_num_candidates  # type: ignore[arg-type]
        )))
    else:
        pools = {TARGET: target.sample(row, settings.num_candidates)}
        if settings.comparator_num_candidates:
            pools[COMPARATOR] = comparator.sample(row, settings.comparator_num_candidates)  # type: ignore[union-attr]
    for pool, expected in ((TARGET, settings.num_candidates), (COMPARATOR, settings.comparator_num_candidates)):
        if len(pools.get(pool, [])) != expected:
            raise PreferenceError(
                f"row {row.source_index}: {pool} source returned {len(pools.get(pool, []))} of {expected}"
            )
    rewards = {pool: _scored(row, cands, score, reward_config) for pool, cands in pools.items()}
    rewards.setdefault(COMPARATOR, [])
    every = [*rewards[TARGET], *rewards[COMPARATOR]]
    mean = math.fsum(every) / len(every)
    pairs = [
        PreferencePair(
            row_index=row.source_index,
            winner_ref=winner,
            loser_ref=loser,
            winner=pools[winner.pool][winner.index],
            loser=pools[loser.pool][loser.index],
            winner_reward=rewards[winner.pool][winner.index],
            loser_reward=rewards[loser.pool][loser.index],
            candidate_mean=mean,
            iteration=iteration,
        )
        for winner, loser in select_pairs(
            settings.pair_selection, rewards[TARGET], rewards[COMPARATOR], settings.pairs_per_sample
        )
    ]
    return pairs, rewards[TARGET], rewards[COMPARATOR]


def collect_preferences(
    rows: Sequence["TravelRow"],
    target: JointSource,
    settings: PreferenceSettings,
    *,
    comparator: Optional[JointSource] = None,
    reward_config: Any = None,
    score: Optional[ScoreFn] = None,
    iteration: int = 0,
    on_row: Optional[Callable[[int, int], None]] = None,
) -> PreferenceCollection:
    """Collect and select pairs over `rows` (one collection phase). `on_row(done, total)` reports progress."""
    if comparator is not None and comparator.kind != target.kind:
        raise PreferenceError(f"comparator candidates are {comparator.kind} but the actors are {target.kind}")
    pairs, prompts, target_rewards, comparator_rewards, tied = [], {}, [], [], []
    for done, row in enumerate(rows, start=1):
        row_pairs, t, c = collect_row_pairs(
            row, target, settings, comparator=comparator, reward_config=reward_config, score=score, iteration=iteration
        )
        prompts[row.source_index] = target.prompt_ids(row)
        pairs.extend(row_pairs)
        target_rewards.extend(t)
        comparator_rewards.extend(c)
        if not row_pairs:
            tied.append(row.source_index)
        if on_row is not None:
            on_row(done, len(rows))
    used = {p.row_index for p in pairs}
    return PreferenceCollection(
        batch=PreferenceBatch(target.kind, tuple(pairs), {i: ids for i, ids in prompts.items() if i in used}),
        target_rewards=tuple(target_rewards),
        comparator_rewards=tuple(comparator_rewards),
        collected_candidates=len(rows) * (settings.num_candidates + settings.comparator_num_candidates),
        rows_without_pairs=tuple(tied),
    )
