"""The centralized comparator teacher (generation_mode=centralized): one model sees both role contexts and
writes the whole joint action, as comparison candidates for the two decentralized actors."""

from __future__ import annotations

from typing import Any, Sequence

from travel.algorithms.comparators import ComparatorConfigError, ComparatorRolePolicy, vocabulary_mismatch
from travel.algorithms.preference_batch import DECENTRALIZED


CENTRAL_SYSTEM_PROMPT = (
    "You are the single planner of a two-role travel-planning team: you see the contexts of both roles and "
    "write the actions of both yourself, first the LOGISTICS action, then the EXPERIENCE action consistent "
    "with it. Return only the JSON object of the role you are asked for, with no prose before or after it. "
    "Always close the assignments array with ] before the final }."
)


def central_user_message(row: Any, agent_id: int, earlier_actions: Sequence[str]) -> str:
    """Both roles' full contexts, the actions already written for this joint action, and which role to write."""
    from travel.task.prompts import build_role_prompt
    from travel.task.roles import ROLES

    parts = [f"=== CONTEXT OF THE {role.name} ROLE ===\n{build_role_prompt(row, role.agent_id).user}" for role in ROLES]
    for earlier, action in zip(ROLES, earlier_actions):
        parts.append(f"=== {earlier.name} ACTION YOU ALREADY WROTE ===\n{action}")
    parts.append(f"=== NOW WRITE THE {ROLES[agent_id].name} ACTION (agent_id {agent_id}) ===")
    return "\n\n".join(parts)


class CentralTeacherSource:
    """generation_mode=centralized: one teacher (the comparator model of `teacher_agent_index`) sees both role
    contexts and writes the whole joint action as one causal sample, decoded in two constrained segments:
    the logistics action, then the experience action conditioned on it, each with the role's own output budget
    (together the aggregate budget of the two role calls). Each segment continues the role's assistant prefill
    under the role's JSON skeleton, so its exact token ids and value mask are also a continuation of that
    actor's own prompt: the projection keeps the teacher's tokens, with no re-tokenization."""

    kind = DECENTRALIZED  # its candidates train the two role actors, one token sequence per role

    def __init__(
        self, actors: Sequence[Any], teacher_model: Any, generator: Any, batch_size: int, teacher_agent_index: int = 0
    ):
        from travel.algorithms.preferences import generation_chunks

        generation_chunks(1, batch_size)
        problem = vocabulary_mismatch(actors[0].tokenizer, actors[1].tokenizer)
        if problem:
            raise ComparatorConfigError(f"generation_mode=centralized needs one vocabulary for both actors ({problem})")
        self.actors = tuple(actors)
        self.teacher = ComparatorRolePolicy(actors[teacher_agent_index], teacher_model, generator)
        self.batch_size = batch_size

    def prompt_ids(self, row: Any) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(int(i) for i in actor.prompt_ids(row)) for actor in self.actors)

    def _request(self, row: Any, agent_id: int, earlier_actions: Sequence[str]) -> Any:
        from travel.generation import DecodeRequest, render_chat_prompt
        from travel.task.roles import assistant_prefill

        tokenizer = self.teacher.actor.tokenizer
        user = central_user_message(row, agent_id, earlier_actions)
        prompt = render_chat_prompt(tokenizer, CENTRAL_SYSTEM_PROMPT, user, assistant_prefill(agent_id))
        return DecodeRequest(prompt, agent_id, row.days, tuple(tokenizer.encode(prompt, add_special_tokens=False)))

    def sample(self, row: Any, num_candidates: int) -> list[Any]:
        from travel.algorithms.preference_batch import JointCandidate, TokenSequence
        from travel.algorithms.preferences import generation_chunks

        decoder, generator, joint = self.teacher.decoder, self.teacher.generator, []
        for size in generation_chunks(num_candidates, self.batch_size):
            (logistics,) = decoder.generate([self._request(row, 0, ())], size, generator=generator)
            follow_ups = [self._request(row, 1, (str(action.text),)) for action in logistics]
            experience = [group[0] for group in decoder.generate(follow_ups, 1, generator=generator)]
            for pair in zip(logistics, experience):
                where = f"row {row.source_index}, central candidate {len(joint)}"
                joint.append(
                    JointCandidate(
                        texts=(str(pair[0].text), str(pair[1].text)),
                        sequences=tuple(
                            TokenSequence.of(c.token_ids, c.value_mask, f"{where}, agent {a}")
                            for a, c in enumerate(pair)
                        ),
                    )
                )
        return joint
