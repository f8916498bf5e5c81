"""The preference data every preference algorithm shares: candidates, pairs and batches.

A joint candidate keeps the role action texts the reward scored and the exact token sequences of the policies
that produced it (two for decentralized actors, one for a joint actor). A pair addresses its members by (pool,
index), never by text, so two candidates with the same text but different token ids stay distinct. A batch
keeps each row's prompt ids once per policy. DPO, the reward model and replay read these types; collection
and pair selection (travel/algorithms/preference/collection.py) write them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

from travel.task.joint_action import CENTRALIZED_JOINT, DECENTRALIZED
from travel.task.joint_action import LAYOUT_KINDS

TARGET, COMPARATOR = "target", "comparator"

TokenIds = tuple[int, ...]


class PreferenceError(ValueError):
    """Bad preference data or options; the message names the row, candidate or option."""


@dataclass(frozen=True)
class TokenSequence:
    """One policy's generated continuation: token ids and the 0/1 mask of value tokens (same length)."""

    ids: TokenIds
    mask: TokenIds

    @classmethod
    def of(cls, ids: Any, mask: Any, where: str) -> "TokenSequence":
        ids_t, mask_t = int_tuple(ids, where + " token ids"), int_tuple(mask, where + " value mask")
        if len(ids_t) != len(mask_t):
            raise PreferenceError(f"{where}: value mask has {len(mask_t)} entries for {len(ids_t)} tokens")
        if any(m not in (0, 1) for m in mask_t):
            raise PreferenceError(f"{where}: value mask entries must be 0 or 1")
        if any(i < 0 for i in ids_t):
            raise PreferenceError(f"{where}: token ids must be >= 0")
        return cls(ids_t, mask_t)


def int_tuple(values: Any, where: str) -> TokenIds:
    """A list, tuple or tensor of integers as a tuple of ints (bools become 0/1)."""
    if hasattr(values, "tolist"):
        values = values.tolist()
    try:
        items = tuple(values)
    except TypeError:
        raise PreferenceError(f"{where}: expected a sequence of integers, got {type(values).__name__}") from None
    out = []
    for value in items:
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int):
            raise PreferenceError(f"{where}: expected integers, got {value!r}")
        out.append(value)
    return tuple(out)


@dataclass(frozen=True)
class JointCandidate:
    """One aligned joint action: the role action texts the reward scores, and the token sequences of the
    policies that produced it (two for decentralized actors, one for a joint actor)."""

    texts: tuple[str, str]
    sequences: tuple[TokenSequence, ...]


@dataclass(frozen=True)
class CandidateRef:
    pool: str  # TARGET | COMPARATOR
    index: int


@dataclass(frozen=True)
class PreferencePair:
    row_index: int  # the row's source_index: the key of its prompt ids in the batch
    winner_ref: CandidateRef
    loser_ref: CandidateRef
    winner: JointCandidate
    loser: JointCandidate
    winner_reward: float  # raw task rewards
    loser_reward: float
    candidate_mean: float  # mean raw reward over all of the row's candidates (target and comparator)
    iteration: int = 0

    @property
    def gap(self) -> float:
        return self.winner_reward - self.loser_reward

    def pool_rewards(self, pool: str) -> list[float]:
        """The rewards of this pair's members drawn from `pool` (target or comparator)."""
        members = ((self.winner_ref, self.winner_reward), (self.loser_ref, self.loser_reward))
        return [reward for ref, reward in members if ref.pool == pool]


@dataclass(frozen=True)
class PreferenceBatch:
    """Pairs plus each row's prompt ids per policy, stored once per row. What DPO and the reward model read."""

    kind: str
    pairs: tuple[PreferencePair, ...] = ()
    prompts: Mapping[int, tuple[TokenIds, ...]] = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in LAYOUT_KINDS:
            raise PreferenceError(f"preference kind {self.kind!r}: expected one of {', '.join(LAYOUT_KINDS)}")
        policies = 2 if self.kind == DECENTRALIZED else 1
        for number, pair in enumerate(self.pairs):
            if pair.row_index not in self.prompts:
                raise PreferenceError(f"pair {number}: no prompt ids for row {pair.row_index}")
            for side in (pair.winner, pair.loser):
                if len(side.sequences) != policies:
                    raise PreferenceError(
                        f"pair {number} (row {pair.row_index}): {len(side.sequences)} token sequences for a "
                        f"{self.kind} batch, expected {policies}"
                    )

    def __len__(self) -> int:
        return len(self.pairs)

    def __iter__(self) -> Iterator[PreferencePair]:
        return iter(self.pairs)

    def prompt_ids(self, pair: PreferencePair, policy: int) -> TokenIds:
        return self.prompts[pair.row_index][policy]

    def select(self, indices: Iterable[int]) -> "PreferenceBatch":
        pairs = tuple(self.pairs[i] for i in indices)
        return PreferenceBatch(self.kind, pairs, {p.row_index: self.prompts[p.row_index] for p in pairs})

    def minibatches(self, size: int) -> Iterator["PreferenceBatch"]:
        if size < 1:
            raise PreferenceError(f"algorithm.train_batch_size={size}: must be >= 1")
        for start in range(0, len(self.pairs), size):
            yield self.select(range(start, min(start + size, len(self.pairs))))

    @staticmethod
    def concat(batches: Sequence["PreferenceBatch"], kind: Optional[str] = None) -> "PreferenceBatch":
        kinds = {b.kind for b in batches} | ({kind} if kind else set())
        if len(kinds) != 1:
            raise PreferenceError(f"cannot combine preference batches of kinds {sorted(kinds)}")
        prompts: dict[int, tuple[TokenIds, ...]] = {}
        for batch in batches:
            for row_index, ids in batch.prompts.items():
                if prompts.setdefault(row_index, ids) != ids:
                    raise PreferenceError(f"row {row_index}: two batches disagree on its prompt ids")
        return PreferenceBatch(kinds.pop(), tuple(p for b in batches for p in b.pairs), prompts)
