"""The centralized comparator teacher (generation_mode=centralized) for decentralized actors.

One teacher (the comparator model of `generation_mode.teacher_agent_index`, under that actor's tokenizer and
decoding settings) sees both role contexts in the joint prompt (travel/task/joint_prompt.py) and writes each
joint candidate as one output of the joint grammar, in one decoder call, under the aggregate output budget of
both role calls. Its output is split deterministically into the two role actions
(travel/task/joint_action.py), which the unchanged task reward scores. For training, each role action is
encoded under that actor's own prompt with its value/schema mask (travel/generation/projection.py); the
actors' own candidates keep their exact sampled tokens. Actors and evaluation stay decentralized.
"""

from __future__ import annotations

from typing import Any, Sequence

from travel.algorithms.preference.batch import DECENTRALIZED, JointCandidate, PreferenceError, TokenSequence
from travel.algorithms.preference.collection import generation_chunks
from travel.algorithms.preference.comparators import ComparatorConfigError, vocabulary_mismatch
from travel.generation import joint_request
from travel.generation.projection import ProjectionError, encode_role_action
from travel.task.joint_action import FAILED_JOINT_ACTION, split_joint_action


class CentralTeacherSource:
    """Joint comparator candidates for two role actors from one teacher; see the module docstring."""

    kind = DECENTRALIZED  # its candidates train the two role actors, one token sequence per role

    def __init__(
        self, actors: Sequence[Any], teacher_model: Any, generator: Any, batch_size: int, teacher_agent_index: int = 0
    ):
        generation_chunks(1, batch_size)
        problem = vocabulary_mismatch(actors[0].tokenizer, actors[1].tokenizer)
        if problem:
            raise ComparatorConfigError(f"generation_mode=centralized needs one vocabulary for both actors ({problem})")
        self.actors = tuple(actors)
        teacher = self.actors[teacher_agent_index]
        self.tokenizer = teacher.tokenizer
        self.output_budget = sum(int(actor.decoder.max_new_tokens) for actor in self.actors)  # both role calls
        self.decoder = teacher.decoder.with_model(teacher_model, max_new_tokens=self.output_budget)
        self.generator = generator
        self.batch_size = batch_size
        self._requests: dict[int, tuple[Any, Any]] = {}

    def prompt_ids(self, row: Any) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(int(i) for i in actor.prompt_ids(row)) for actor in self.actors)

    def request(self, row: Any) -> Any:
        """The teacher's joint request for `row` (rendered once per row)."""
        cached = self._requests.get(id(row))
        if cached is None or cached[0] is not row:
            cached = self._requests[id(row)] = (row, joint_request(self.tokenizer, row, values=self.decoder.values))
        return cached[1]

    def sample(self, row: Any, num_candidates: int) -> list[JointCandidate]:
        """`num_candidates` joint candidates, in generation calls of at most `batch_size`; each candidate is one
        decoded sequence of the joint grammar."""

        joint: list[JointCandidate] = []
        for size in generation_chunks(num_candidates, self.batch_size):
            (outputs,) = self.decoder.generate([self.request(row)], size, generator=self.generator)
            for output in outputs:
                where = f"row {row.source_index}, central candidate {len(joint)}"
                texts = split_joint_action(str(output.text))
                if texts == FAILED_JOINT_ACTION:
                    raise PreferenceError(f"{where}: the teacher's joint action does not split into role actions")
                try:
                    encoded = [
                        encode_role_action(actor.decoder, actor.agent_id, row.days, text)
                        for actor, text in zip(self.actors, texts)
                    ]
                except ProjectionError as exc:
                    raise PreferenceError(f"{where}: {exc}") from None
                joint.append(
                    JointCandidate(
                        texts=texts,
                        sequences=tuple(
                            TokenSequence.of(ids, mask, f"{where}, agent {a}") for a, (ids, mask) in enumerate(encoded)
                        ),
                    )
                )
        return joint
