"""Preference replay: one JSON shard per iteration and the replay sample each iteration trains on.

Shards live at `<replay dir>/iteration_NNNN.json`, written atomically (temporary file, fsync, rename). A
shard and each of its records carry the format version and the record kind (`decentralized`: one token
sequence per role actor; `centralized_joint`: one for the joint actor). Loading refuses another kind or a
missing or different version, naming the file and record, so a replay directory from another setup is
never mixed in. Token ids and 0/1 value masks round-trip exactly.

Sampling modes (docs/algorithms.md "Replay"): `lambda_decay` weighs the non-empty shards newest-first by
(1 - l) l^age, normalised; every draw picks a shard by weight, then the next record of that shard's own
permutation (without replacement, reshuffled when exhausted). `current` draws from the newest non-empty
shard only; `all_history` draws uniformly over every stored record. The sample is shuffled at the end.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Optional

from travel.algorithms.preference.batch import (
    COMPARATOR,
    LAYOUT_KINDS,
    TARGET,
    CandidateRef,
    JointCandidate,
    PreferenceBatch,
    PreferenceError,
    PreferencePair,
    TokenSequence,
    int_tuple,
)
from travel.io import write_json_atomic

REPLAY_FORMAT = "travel-preference-replay"
REPLAY_VERSION = 1
REPLAY_MODES = ("lambda_decay", "current", "all_history")


class ReplayError(ValueError):
    """A replay shard or option that cannot be used; the message names the file, record or option."""


def shard_name(iteration: int) -> str:
    return f"iteration_{iteration:04d}.json"


# ---- encoding -------------------------------------------------------------------------------------


def _candidate_record(candidate: JointCandidate) -> dict[str, Any]:
    return {
        "texts": list(candidate.texts),
        "sequences": [{"ids": list(s.ids), "mask": list(s.mask)} for s in candidate.sequences],
    }


def pair_record(pair: PreferencePair, kind: str) -> dict[str, Any]:
    return {
        "version": REPLAY_VERSION,
        "kind": kind,
        "row_index": pair.row_index,
        "iteration": pair.iteration,
        "winner_ref": [pair.winner_ref.pool, pair.winner_ref.index],
        "loser_ref": [pair.loser_ref.pool, pair.loser_ref.index],
        "winner_reward": pair.winner_reward,
        "loser_reward": pair.loser_reward,
        "candidate_mean": pair.candidate_mean,
        "winner": _candidate_record(pair.winner),
        "loser": _candidate_record(pair.loser),
    }


def shard_payload(batch: PreferenceBatch, iteration: int) -> dict[str, Any]:
    return {
        "format": REPLAY_FORMAT,
        "version": REPLAY_VERSION,
        "kind": batch.kind,
        "iteration": iteration,
        "prompts": {str(row): [list(ids) for ids in prompts] for row, prompts in sorted(batch.prompts.items())},
        "pairs": [pair_record(pair, batch.kind) for pair in batch.pairs],
    }


# ---- decoding -------------------------------------------------------------------------------------


def _check_marks(record: Any, kind: str, where: str) -> None:
    if not isinstance(record, dict):
        raise ReplayError(f"{where}: expected a JSON object")
    if "version" not in record:
        raise ReplayError(f"{where}: no replay version; it was not written by this version (use a fresh replay dir)")
    if record["version"] != REPLAY_VERSION:
        raise ReplayError(f"{where}: replay version {record['version']!r}, this version reads {REPLAY_VERSION}")
    if record.get("kind") != kind:
        raise ReplayError(f"{where}: a {record.get('kind')!r} record, expected {kind!r} (use a fresh replay dir)")


def _candidate(record: Any, where: str) -> JointCandidate:
    try:
        texts = tuple(str(t) for t in record["texts"])
        sequences = tuple(
            TokenSequence.of(s["ids"], s["mask"], f"{where}, sequence {n}") for n, s in enumerate(record["sequences"])
        )
    except (KeyError, TypeError) as exc:
        raise ReplayError(f"{where}: malformed candidate ({type(exc).__name__}: {exc})") from None
    except PreferenceError as exc:
        raise ReplayError(str(exc)) from None
    if len(texts) != 2:
        raise ReplayError(f"{where}: expected 2 role texts, got {len(texts)}")
    return JointCandidate(texts=texts, sequences=sequences)  # type: ignore[arg-type]


def _ref(value: Any, where: str) -> CandidateRef:
    if not (
        isinstance(value, list) and len(value) == 2 and value[0] in (TARGET, COMPARATOR) and isinstance(value[1], int)
    ):
        raise ReplayError(f'{where}: expected ["target"|"comparator", index], got {value!r}')
    return CandidateRef(value[0], value[1])


def _pair(record: dict[str, Any], kind: str, where: str) -> PreferencePair:
    _check_marks(record, kind, where)
    try:
        return PreferencePair(
            row_index=int(record["row_index"]),
            winner_ref=_ref(record["winner_ref"], where + " winner_ref"),
            loser_ref=_ref(record["loser_ref"], where + " loser_ref"),
            winner=_candidate(record["winner"], where + " winner"),
            loser=_candidate(record["loser"], where + " loser"),
            winner_reward=float(record["winner_reward"]),
            loser_reward=float(record["loser_reward"]),
            candidate_mean=float(record["candidate_mean"]),
            iteration=int(record["iteration"]),
        )
    except KeyError as exc:
        raise ReplayError(f"{where}: missing field {exc}") from None


def batch_from_payload(payload: Any, kind: str, where: str) -> PreferenceBatch:
    if kind not in LAYOUT_KINDS:
        raise ReplayError(f"replay kind {kind!r}: expected one of {', '.join(LAYOUT_KINDS)}")
    _check_marks(payload, kind, where)
    if payload.get("format") != REPLAY_FORMAT:
        raise ReplayError(f"{where}: format {payload.get('format')!r}, expected {REPLAY_FORMAT!r}")
    try:
        prompts = {
            int(row): tuple(int_tuple(ids, f"{where}, row {row} prompt") for ids in per_policy)
            for row, per_policy in payload["prompts"].items()
        }
        records = payload["pairs"]
    except PreferenceError as exc:
        raise ReplayError(str(exc)) from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ReplayError(f"{where}: malformed shard ({type(exc).__name__}: {exc})") from None
    pairs = tuple(_pair(record, kind, f"{where}, pair {n}") for n, record in enumerate(records))
    try:
        return PreferenceBatch(kind, pairs, prompts)
    except PreferenceError as exc:
        raise ReplayError(f"{where}: {exc}") from None


# ---- sampling -------------------------------------------------------------------------------------


def lambda_decay_weights(num_shards: int, lam: float) -> list[float]:
    """Weights newest-first: index 0 is the newest shard. lam = 1 weighs all shards equally."""
    if not 0.0 <= lam <= 1.0:
        raise ReplayError(f"algorithm.preference_replay_lambda={lam}: must be in [0, 1]")
    if num_shards < 1:
        return []
    if lam == 1.0:
        return [1.0 / num_shards] * num_shards
    raw = [(1.0 - lam) * lam**age for age in range(num_shards)]
    total = sum(raw)
    return [w / total for w in raw]


class _Cycle:
    """Draws a shard's records without replacement; reshuffles when every record was drawn once."""

    def __init__(self, size: int, rng: random.Random):
        self.size, self.rng, self.order = size, rng, []

    def next(self) -> int:
        if not self.order:
            self.order = list(range(self.size))
            self.rng.shuffle(self.order)
        return self.order.pop()


def sample_replay(
    shards: list[PreferenceBatch],
    size: int,
    rng: random.Random,
    mode: str = "lambda_decay",
    lam: Optional[float] = None,
    kind: Optional[str] = None,
) -> PreferenceBatch:
    """`size` pairs from `shards` (oldest first; empty ones are ignored); `kind` names an empty result's kind."""
    if mode not in REPLAY_MODES:
        raise ReplayError(f"algorithm.preference_replay_mode={mode!r}: choose one of {', '.join(REPLAY_MODES)}")
    shards = [s for s in shards if len(s)]
    if not shards or size < 1:
        return PreferenceBatch(shards[0].kind if shards else (kind or LAYOUT_KINDS[0]))
    if mode == "all_history":
        shards = [PreferenceBatch.concat(shards)]
        weights = [1.0]
    elif mode == "current":
        shards = shards[-1:]
        weights = [1.0]
    else:
        if lam is None:
            raise ReplayError("algorithm.preference_replay_lambda is required for preference_replay_mode=lambda_decay")
        weights = list(reversed(lambda_decay_weights(len(shards), lam)))  # oldest first, like `shards`
    cycles = [_Cycle(len(s), rng) for s in shards]
    drawn: list[tuple[int, int]] = []
    for _ in range(size):
        shard = rng.choices(range(len(shards)), weights=weights)[0]
        drawn.append((shard, cycles[shard].next()))
    rng.shuffle(drawn)
    return PreferenceBatch.concat([shards[s].select([i]) for s, i in drawn], kind=shards[0].kind)


class ReplayStore:
    """The run's replay directory: writes each iteration's shard and samples the training pairs."""

    def __init__(self, directory: str | Path, kind: str):
        if kind not in LAYOUT_KINDS:
            raise ReplayError(f"replay kind {kind!r}: expected one of {', '.join(LAYOUT_KINDS)}")
        self.directory = Path(directory)
        self.kind = kind
        self._shards: dict[int, PreferenceBatch] = {}

    def path(self, iteration: int) -> Path:
        return self.directory / shard_name(iteration)

    def write(self, iteration: int, batch: PreferenceBatch) -> Path:
        """Store an iteration's new pairs (an empty shard is written too, but never sampled)."""
        if batch.kind != self.kind:
            raise ReplayError(f"cannot store {batch.kind} pairs in a {self.kind} replay store")
        path = write_json_atomic(self.path(iteration), shard_payload(batch, iteration))
        self._shards[iteration] = batch
        return path

    def load(self, iteration: int) -> PreferenceBatch:
        path = self.path(iteration)
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ReplayError(f"{path}: no replay shard for iteration {iteration}") from None
        except json.JSONDecodeError as exc:
            raise ReplayError(f"{path}: not valid JSON ({exc})") from None
        return batch_from_payload(payload, self.kind, str(path))

    def reload(self) -> list[int]:
        """Read every shard already in the directory (resuming a run); returns their iterations."""
        self._shards = {}
        for path in sorted(self.directory.glob("iteration_*.json")):
            iteration = int(path.stem.split("_")[1])
            self._shards[iteration] = self.load(iteration)
        return sorted(self._shards)

    @property
    def shards(self) -> list[PreferenceBatch]:
        return [self._shards[i] for i in sorted(self._shards)]

    @property
    def total_pairs(self) -> int:
        return sum(len(s) for s in self._shards.values())

    def default_sample_size(self, new_pairs: int) -> int:
        """The number of new pairs, or the newest non-empty shard's size when this iteration had none."""
        if new_pairs:
            return new_pairs
        sizes = [len(s) for s in self.shards if len(s)]
        return sizes[-1] if sizes else 0

    def sample(
        self, new_pairs: int, rng: random.Random, mode: str, lam: Optional[float] = None, size: Optional[int] = None
    ) -> PreferenceBatch:
        """The pairs this iteration trains on."""
        count = self.default_sample_size(new_pairs) if size is None else size
        return sample_replay(self.shards, count, rng, mode, lam, kind=self.kind)
