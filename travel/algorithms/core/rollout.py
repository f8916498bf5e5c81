"""The rollout seam every trainer shares: K aligned joint actions for one row, scored by the shared reward.

Each policy of a layout (travel/agents/layouts.py) samples K candidates from its own prompt; candidate k of
every policy forms joint action k (aligned pairing): the two role actors' candidates k, or the joint actor's
candidate k split into the two role actions. The shared reward scores every joint action once. One joint
action is one env step, so a training rollout advances the sampler's `env_step` by K, whatever the
number of agents; evaluation rollouts leave it unchanged.

Policies are anything with `prompt_ids(row)` and `sample(row, num_candidates, greedy=...)`, so tests
drive the seam with scripted candidates (two role policies: a decentralized layout) and trainers with a
layout of real actors. A policy that also has
`sample_rows(rows, num_candidates, greedy=...)` (the actors) samples several rows in one generation
call: `rollouts` hands it up to `rows_per_call` rows at once (all given rows when None). On a GPU a
decode step costs about the same for 4 or 40 sequences, so a buffer of rows sampled together takes a
fraction of the time the rows take one by one; the rows' actions do not depend on each other.

The same sampler draws preference collection's candidates (travel.algorithms.preference.collection.PolicySource,
for the target actors and a comparator's role policies) with `candidates_per_call`, the generation batch, and
`sample_agents`, the sampling half of a rollout; collection labels them with the run's score function.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from travel.agents.layouts import DecentralizedLayout, PolicyLayout
from travel.reward import score_joint_actions

if TYPE_CHECKING:
    from travel.data.row import TravelRow
    from travel.generation.requests import Candidate
    from travel.reward import RewardResult


class Policy(Protocol):
    """One role's policy. Its candidates (travel.generation.requests.Candidate, or anything with the same
    fields in tests) carry the action's full text (prefill included), the generated token ids and a 0/1 mask
    over them marking the value tokens the policy chose (schema tokens are 0)."""

    agent_id: int

    def prompt_ids(self, row: "TravelRow") -> Sequence[int]:
        """The rendered prompt's token ids (rendered once per row and cached by the policy)."""

    def sample(self, row: "TravelRow", num_candidates: int, *, greedy: bool = False) -> list["Candidate"]:
        """`num_candidates` actions for this row's prompt."""


def sample_rows(policy: Policy, rows: Sequence["TravelRow"], num_candidates: int, greedy: bool) -> list[list["Candidate"]]:
    """`num_candidates` actions per row, in one call when the policy can batch rows."""
    batched = getattr(policy, "sample_rows", None)
    if batched is not None:
        return [list(group) for group in batched(rows, num_candidates, greedy=greedy)]
    return [list(policy.sample(row, num_candidates, greedy=greedy)) for row in rows]


def rows_per_call_option(value: Any) -> int | None:
    """generation.rows_per_call checked: a positive int, or None for all given rows."""
    if value is not None and int(value) < 1:
        raise ValueError(f"generation.rows_per_call={value}: must be >= 1 (or null for a whole buffer)")
    return None if value is None else int(value)


ScoreFn = Callable[["TravelRow", list[tuple[str, str]], Any], list["RewardResult"]]


@dataclass(frozen=True)
class AgentSamples:
    agent_id: int
    prompt_ids: Sequence[int]
    candidates: tuple["Candidate", ...]

    @property
    def texts(self) -> list[str]:
        return [candidate.text for candidate in self.candidates]


@dataclass(frozen=True)
class JointRollout:
    """K scored joint actions of one row: each trainable policy's samples (`agents`: two role actors, or one
    joint actor) and the role action texts the reward scored (`actions`). `env_step` is the sampler's count
    after this rollout."""

    row: "TravelRow"
    agents: tuple[AgentSamples, ...]
    actions: tuple[tuple[str, str], ...]
    results: tuple["RewardResult", ...]
    env_step: int
    generation_seconds: float = 0.0  # wall time of both agents' sampling
    reward_seconds: float = 0.0  # wall time of scoring the K joint actions

    @property
    def num_joint_actions(self) -> int:
        return len(self.results)

    @property
    def rewards(self) -> list[float]:
        return [float(result.reward) for result in self.results]

    @property
    def metrics(self) -> list[dict[str, float]]:
        return [result.metrics for result in self.results]

    def joint_texts(self, k: int) -> tuple[str, str]:
        """The (logistics, experience) action texts of joint action k."""
        return self.actions[k]


def as_layout(policies: Any) -> Any:
    """A policy layout (travel/agents/layouts.py) as it is, or two role policies as a decentralized layout."""

    if isinstance(policies, PolicyLayout):
        return policies
    if len(policies) != 2:
        raise ValueError(f"a joint rollout needs exactly two policies (logistics, experience), got {len(policies)}")
    return DecentralizedLayout(policies)


def _default_score(row, pairs, config):
    return score_joint_actions(row, pairs, config)


class JointRolloutSampler:
    """Samples, pairs and scores joint actions; counts training env steps.

    With `parallel=True` each agent generates in its own persistent worker thread (one per device), so
    two actors on two GPUs sample at the same time.
    """

    def __init__(
        self,
        policies: Sequence[Policy],
        reward_config: Any = None,
        *,
        score: ScoreFn | None = None,
        parallel: bool = False,
        rows_per_call: int | None = None,
        candidates_per_call: int | None = None,
        acting: Sequence[Policy] | None = None,
    ):
        """`candidates_per_call`: each agent samples a row's candidates in generation calls of at most this
        many, one row at a time (preference collection's generation batch); None: all of a call's rows and
        candidates in one call per agent. `acting`: policies that sample in place of the layout's own, one per
        layout policy (a comparator's), while the layout still turns their candidates into role actions."""
        self.layout = as_layout(policies)
        self.policies = tuple(self.layout.actors if acting is None else acting)
        if len(self.policies) != self.layout.num_policies:
            raise ValueError(f"{len(self.policies)} acting policies for a layout of {self.layout.num_policies}")
        self.reward_config = reward_config
        self.score = score or _default_score
        self.rows_per_call = rows_per_call_option(rows_per_call)
        if candidates_per_call is not None and candidates_per_call < 1:
            raise ValueError(f"candidates_per_call={candidates_per_call}: must be >= 1")
        self.candidates_per_call = candidates_per_call
        self.env_step = 0
        self._workers = [ThreadPoolExecutor(max_workers=1) for _ in self.policies] if parallel else None

    def _sampled_groups(
        self, policy: Policy, rows: Sequence["TravelRow"], num_candidates: int, greedy: bool
    ) -> list[list["Candidate"]]:
        if self.candidates_per_call is None:
            return sample_rows(policy, rows, num_candidates, greedy)
        groups = []
        for row in rows:
            group: list["Candidate"] = []
            for start in range(0, num_candidates, self.candidates_per_call):
                size = min(self.candidates_per_call, num_candidates - start)
                call = list(policy.sample(row, size, greedy=greedy))
                self._check_call(policy, row, len(call), size)
                group.extend(call)
            groups.append(group)
        return groups

    def _check_call(self, policy: Policy, row: "TravelRow", returned: int, expected: int) -> None:
        """One generation call of `candidates_per_call` returned `returned` candidates."""
        if returned != expected:
            raise RuntimeError(
                f"agent {policy.agent_id} returned {returned} candidates for row {row.source_index} in one call, "
                f"expected {expected}"
            )

    def _check_candidates(self, policy: Policy, row: "TravelRow", candidates: Sequence["Candidate"], expected: int) -> None:
        if len(candidates) != expected:
            raise RuntimeError(
                f"agent {policy.agent_id} returned {len(candidates)} candidates for row {row.source_index}, "
                f"expected {expected}"
            )
        for k, candidate in enumerate(candidates):
            if len(candidate.token_ids) != len(candidate.value_mask):
                raise RuntimeError(
                    f"agent {policy.agent_id}, row {row.source_index}, candidate {k}: value mask has "
                    f"{len(candidate.value_mask)} entries for {len(candidate.token_ids)} tokens"
                )

    def _agent_samples(
        self, policy: Policy, rows: Sequence["TravelRow"], num_candidates: int, greedy: bool
    ) -> list[AgentSamples]:
        groups = self._sampled_groups(policy, rows, num_candidates, greedy)
        if len(groups) != len(rows):
            raise RuntimeError(f"agent {policy.agent_id} returned candidates for {len(groups)} of {len(rows)} rows")
        samples = []
        for row, candidates in zip(rows, groups):
            self._check_candidates(policy, row, candidates, num_candidates)
            samples.append(AgentSamples(policy.agent_id, policy.prompt_ids(row), tuple(candidates)))
        return samples

    def sample_agents(
        self, rows: Sequence["TravelRow"], num_candidates: int, greedy: bool = False
    ) -> list[tuple[AgentSamples, ...]]:
        """Per row, each agent's `num_candidates` candidates (unscored); candidate k of both is joint action k.
        The agents sample in agent order, or in their worker threads when parallel."""
        if self._workers is None:
            per_agent = [self._agent_samples(p, rows, num_candidates, greedy) for p in self.policies]
        else:
            futures = [
                worker.submit(self._agent_samples, policy, rows, num_candidates, greedy)
                for worker, policy in zip(self._workers, self.policies)
            ]
            per_agent = [future.result() for future in futures]
        return [tuple(samples[index] for samples in per_agent) for index in range(len(rows))]

    def rollout(
        self, row: "TravelRow", num_candidates: int, *, greedy: bool = False, count_env_steps: bool = True
    ) -> JointRollout:
        """K joint actions for `row`; a training rollout (`count_env_steps`) advances `env_step` by K."""
        return self.rollouts([row], num_candidates, greedy=greedy, count_env_steps=count_env_steps)[0]

    def rollouts(
        self, rows: Sequence["TravelRow"], num_candidates: int, *, greedy: bool = False, count_env_steps: bool = True
    ) -> list[JointRollout]:
        """One rollout per row, in row order, as if `rollout` ran row by row: each rollout's `env_step` counts
        the rows before it. Rows are sampled `rows_per_call` at a time; a call's generation time is split
        evenly over its rows."""
        if num_candidates < 1:
            raise ValueError(f"num_candidates must be >= 1, got {num_candidates}")
        size = self.rows_per_call or max(len(rows), 1)
        results: list[JointRollout] = []
        for start in range(0, len(rows), size):
            results.extend(self._rollout_call(rows[start : start + size], num_candidates, greedy, count_env_steps))
        return results

    def _rollout_call(
        self, rows: Sequence["TravelRow"], num_candidates: int, greedy: bool, count_env_steps: bool
    ) -> list[JointRollout]:
        started = time.perf_counter()
        sampled = self.sample_agents(rows, num_candidates, greedy)
        generation_seconds = (time.perf_counter() - started) / len(rows)
        rollouts = []
        for row, agents in zip(rows, sampled):
            scoring = time.perf_counter()
            pairs = [self.layout.role_actions([agent.candidates[k].text for agent in agents]) for k in range(num_candidates)]
            results = tuple(self.score(row, pairs, self.reward_config))
            reward_seconds = time.perf_counter() - scoring
            if len(results) != num_candidates:
                raise RuntimeError(
                    f"the reward scored {len(results)} of {num_candidates} joint actions of row {row.source_index}"
                )
            if count_env_steps:
                self.env_step += num_candidates
            rollouts.append(
                JointRollout(
                    row=row,
                    agents=agents,
                    actions=tuple(pairs),
                    results=results,
                    env_step=self.env_step,
                    generation_seconds=generation_seconds,
                    reward_seconds=reward_seconds,
                )
            )
        return rollouts

    def close(self) -> None:
        for worker in self._workers or ():
            worker.shutdown(wait=True)
        self._workers = None
