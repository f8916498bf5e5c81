"""The rollout seam every trainer shares: K aligned joint actions for one row, scored by the shared reward.

Each agent samples K candidates from its own prompt; candidate k of agent 0 and candidate k of agent 1
form joint action k (aligned pairing). The shared reward scores every joint action once. One joint
action is one env step, so a training rollout advances the sampler's `env_step` by K, whatever the
number of agents; evaluation rollouts leave it unchanged.

Policies are anything with `prompt_ids(row)` and `sample(row, num_candidates, greedy=...)`, so tests
drive the seam with scripted candidates and trainers with real actors.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

if TYPE_CHECKING:
    from travel.data.row import TravelRow
    from travel.reward import RewardResult


class Candidate(Protocol):
    """One sampled action of one agent: its full text (prefill included), the generated token ids and a
    0/1 mask over them marking the value tokens the policy chose (schema tokens are 0)."""

    text: str
    token_ids: Sequence[int]
    value_mask: Sequence[int]


class Policy(Protocol):
    agent_id: int

    def prompt_ids(self, row: "TravelRow") -> Sequence[int]:
        """The rendered prompt's token ids (rendered once per row and cached by the policy)."""

    def sample(self, row: "TravelRow", num_candidates: int, *, greedy: bool = False) -> list[Candidate]:
        """`num_candidates` actions for this row's prompt."""


ScoreFn = Callable[["TravelRow", list[tuple[str, str]], Any], list["RewardResult"]]


@dataclass(frozen=True)
class AgentSamples:
    agent_id: int
    prompt_ids: Sequence[int]
    candidates: tuple[Candidate, ...]

    @property
    def texts(self) -> list[str]:
        return [candidate.text for candidate in self.candidates]


@dataclass(frozen=True)
class JointRollout:
    """K scored joint actions of one row. `env_step` is the sampler's count after this rollout."""

    row: "TravelRow"
    agents: tuple[AgentSamples, ...]
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

    def joint_texts(self, k: int) -> tuple[str, ...]:
        return tuple(agent.candidates[k].text for agent in self.agents)


def _default_score(row, pairs, config):
    from travel.reward import score_joint_actions

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
    ):
        if len(policies) != 2:
            raise ValueError(f"a joint rollout needs exactly two policies (logistics, experience), got {len(policies)}")
        for expected, policy in enumerate(policies):
            if getattr(policy, "agent_id", expected) != expected:
                raise ValueError(f"policy {expected} has agent_id {policy.agent_id}; policies must be in agent order")
        self.policies = tuple(policies)
        self.reward_config = reward_config
        self.score = score or _default_score
        self.env_step = 0
        self._workers = [ThreadPoolExecutor(max_workers=1) for _ in policies] if parallel else None

    def _agent_samples(self, policy: Policy, row: "TravelRow", num_candidates: int, greedy: bool) -> AgentSamples:
        candidates = tuple(policy.sample(row, num_candidates, greedy=greedy))
        if len(candidates) != num_candidates:
            raise RuntimeError(
                f"agent {policy.agent_id} returned {len(candidates)} candidates for row {row.source_index}, "
                f"expected {num_candidates}"
            )
        for k, candidate in enumerate(candidates):
            if len(candidate.token_ids) != len(candidate.value_mask):
                raise RuntimeError(
                    f"agent {policy.agent_id}, row {row.source_index}, candidate {k}: value mask has "
                    f"{len(candidate.value_mask)} entries for {len(candidate.token_ids)} tokens"
                )
        return AgentSamples(policy.agent_id, policy.prompt_ids(row), candidates)

    def rollout(
        self, row: "TravelRow", num_candidates: int, *, greedy: bool = False, count_env_steps: bool = True
    ) -> JointRollout:
        """K joint actions for `row`; a training rollout (`count_env_steps`) advances `env_step` by K."""
        if num_candidates < 1:
            raise ValueError(f"num_candidates must be >= 1, got {num_candidates}")
        started = time.perf_counter()
        if self._workers is None:
            agents = tuple(self._agent_samples(p, row, num_candidates, greedy) for p in self.policies)
        else:
            futures = [
                worker.submit(self._agent_samples, policy, row, num_candidates, greedy)
                for worker, policy in zip(self._workers, self.policies)
            ]
            agents = tuple(future.result() for future in futures)
        generated = time.perf_counter()
        pairs = [tuple(agent.candidates[k].text for agent in agents) for k in range(num_candidates)]
        results = tuple(self.score(row, pairs, self.reward_config))
        scored = time.perf_counter()
        if len(results) != num_candidates:
            raise RuntimeError(f"the reward scored {len(results)} of {num_candidates} joint actions of row {row.source_index}")
        if count_env_steps:
            self.env_step += num_candidates
        return JointRollout(
            row=row,
            agents=agents,
            results=results,
            env_step=self.env_step,
            generation_seconds=generated - started,
            reward_seconds=scored - generated,
        )

    def close(self) -> None:
        for worker in self._workers or ():
            worker.shutdown(wait=True)
        self._workers = None
