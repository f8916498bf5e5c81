"""The scalable curriculum: filter candidate rows, stratified train/eval split, eval panels, short set, and
(held_out_eval) every row the run does not train on, in and out of the curriculum's cells.

The split reproduces the earlier implementation call for call (`random.Random(seed)`, one shuffle per
stratum in sorted stratum order, then one shuffle of the whole train list), so the default config yields
eval panels P1..P5 = [19, 74, 29, 90], [5, 68, 20, 80], [14, 63, 39, 94], [4, 71, 22, 88], [9, 70, 33, 92].
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from travel.data.row import TravelRow


# The terminal evaluation's held-out groups: rows of the curriculum's (days, level, city count) cells that the
# run did not train on (the eval pool and the unused rows), and rows of other cells (7-day, 3-city, hard, ...).
IN_CURRICULUM, OUT_OF_CURRICULUM = "in_curriculum", "out_of_curriculum"
HELD_OUT_GROUPS = (IN_CURRICULUM, OUT_OF_CURRICULUM)


def cell_name(row: TravelRow) -> str:
    """A row's (days, level, city count) cell, as tables show it."""
    cities = f"{row.visiting_city_number} {'city' if row.visiting_city_number == 1 else 'cities'}"
    return f"{row.days}-day {row.level} {cities}"


class CurriculumError(ValueError):
    """A curriculum option that cannot work; the message names the option."""


@dataclass(frozen=True)
class CurriculumSplit:
    candidates: tuple[TravelRow, ...]
    train: tuple[TravelRow, ...]  # training order
    eval: tuple[TravelRow, ...]  # interleaved: panel p holds eval[p*panel_size:(p+1)*panel_size]
    panel_size: int
    short_days: tuple[int, ...]
    # source_index -> why the row is in neither train nor eval: a filter option, or a full cell
    excluded: Mapping[int, str] = field(default_factory=dict)
    # curriculum.held_out_eval: the rows not trained on beyond the eval pool, by group (HELD_OUT_GROUPS)
    held_out: Mapping[str, tuple[TravelRow, ...]] = field(default_factory=dict)

    @property
    def panels(self) -> tuple[tuple[TravelRow, ...], ...]:
        size = self.panel_size
        return tuple(self.eval[i : i + size] for i in range(0, len(self.eval), size))

    @property
    def anchor(self) -> tuple[TravelRow, ...]:
        """The fixed periodic-evaluation panel (P1)."""
        return self.panels[0] if self.eval else ()

    @property
    def short(self) -> tuple[TravelRow, ...]:
        """Train rows of the short phase, in training order."""
        return tuple(row for row in self.train if row.days in self.short_days)


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, float(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, str(value))


def _allow(values: Optional[Sequence[Any]], value: Any, fold: bool = False) -> bool:
    if values is None:
        return True
    if fold:
        return str(value).casefold() in {str(v).casefold() for v in values}
    return value in values


def _count(name: str, value: object, minimum: int | None) -> int:
    """An integer curriculum option; a fraction, a bool or text is an error, never truncated."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise CurriculumError(f"curriculum.{name}={value!r}: expected an integer")
    if minimum is not None and value < minimum:
        raise CurriculumError(f"curriculum.{name}={value}: must be >= {minimum}")
    return value


class ScalableCurriculum:
    """Filters by days / level / city count, then splits each (days, level) cell into train and eval rows."""

    STRATIFY_FIELDS = ("days", "level", "visiting_city_number", "people_number")

    def __init__(
        self,
        days: Optional[Sequence[int]] = (3, 5),
        levels: Optional[Sequence[str]] = ("easy", "medium"),
        visiting_city_numbers: Optional[Sequence[int]] = (1, 2),
        select_shortest: Optional[int] = 80,
        max_reference_chars: Optional[int] = None,
        stratify_by: Sequence[str] = ("days", "level"),
        interleave_eval: bool = True,
        seed: int = 42,
        train_per_cell: int = 15,
        eval_per_cell: int = 5,
        eval_panel_size: int = 4,
        short_days: Sequence[int] = (3,),
        short_epochs: int = 8,
        held_out_eval: bool = False,
    ):
        train_per_cell, eval_per_cell = _count("train_per_cell", train_per_cell, 0), _count("eval_per_cell", eval_per_cell, 0)
        eval_panel_size, short_epochs = _count("eval_panel_size", eval_panel_size, 1), _count("short_epochs", short_epochs, 0)
        seed = _count("seed", seed, None)
        unknown = [f for f in stratify_by if f not in self.STRATIFY_FIELDS]
        if unknown:
            raise CurriculumError(
                f"curriculum.stratify_by: unknown field {unknown[0]!r}; choose from {', '.join(self.STRATIFY_FIELDS)}"
            )
        self.days = None if days is None else tuple(int(d) for d in days)
        self.levels = None if levels is None else tuple(str(level) for level in levels)
        self.visiting_city_numbers = None if visiting_city_numbers is None else tuple(int(v) for v in visiting_city_numbers)
        self.select_shortest = select_shortest
        self.max_reference_chars = max_reference_chars
        self.stratify_by = tuple(stratify_by)
        self.interleave_eval = bool(interleave_eval)
        self.seed = int(seed)
        self.train_per_cell = int(train_per_cell)
        self.eval_per_cell = int(eval_per_cell)
        self.eval_panel_size = int(eval_panel_size)
        self.short_days = tuple(int(d) for d in short_days)
        self.short_epochs = int(short_epochs)
        if not isinstance(held_out_eval, bool):
            raise CurriculumError(f"curriculum.held_out_eval={held_out_eval!r}: expected true or false")
        self.held_out_eval = held_out_eval

    def in_cells(self, row: TravelRow) -> bool:
        """Whether the row's days, level and city count are among the curriculum's."""
        return (
            _allow(self.days, row.days)
            and _allow(self.levels, row.level, fold=True)
            and _allow(self.visiting_city_numbers, row.visiting_city_number)
        )

    def filter(self, rows: Sequence[TravelRow]) -> list[TravelRow]:
        excluded = self.excluded(rows)
        return [row for row in rows if row.source_index not in excluded]

    def excluded(self, rows: Sequence[TravelRow]) -> dict[int, str]:
        """source_index -> the filter option that drops the row, for every row the filters drop."""
        reasons: dict[int, str] = {}
        for row in rows:
            if not _allow(self.days, row.days):
                reasons[row.source_index] = f"days={row.days} not in curriculum.days={list(self.days or ())}"
            elif not _allow(self.levels, row.level, fold=True):
                reasons[row.source_index] = f"level={row.level!r} not in curriculum.levels={list(self.levels or ())}"
            elif not _allow(self.visiting_city_numbers, row.visiting_city_number):
                reasons[row.source_index] = (
                    f"visiting_city_number={row.visiting_city_number} not in "
                    f"curriculum.visiting_city_numbers={list(self.visiting_city_numbers or ())}"
                )
            elif self.max_reference_chars is not None and row.reference_chars > self.max_reference_chars:
                reasons[row.source_index] = (
                    f"reference_chars={row.reference_chars} above curriculum.max_reference_chars={self.max_reference_chars}"
                )
        kept = [row for row in rows if row.source_index not in reasons]
        if self.select_shortest is not None and int(self.select_shortest) < len(kept):
            by_length = sorted(kept, key=lambda r: (r.reference_chars, r.source_index))
            shortest = {r.source_index for r in by_length[: int(self.select_shortest)]}
            for row in kept:
                if row.source_index not in shortest:
                    reasons[row.source_index] = f"not among the curriculum.select_shortest={self.select_shortest} shortest rows"
        return reasons

    def split(self, rows: Sequence[TravelRow]) -> CurriculumSplit:
        """Filter `rows` (source order) and split them; raises CurriculumError naming the option that cannot work."""
        excluded = self.excluded(rows)
        candidates = [row for row in rows if row.source_index not in excluded]
        if not candidates:
            raise CurriculumError(
                f"curriculum filters (days={self.days}, levels={self.levels}, "
                f"visiting_city_numbers={self.visiting_city_numbers}) keep no rows out of {len(rows)}"
            )
        groups: dict[tuple, list[TravelRow]] = {}
        for row in candidates:
            groups.setdefault(tuple(getattr(row, f) for f in self.stratify_by), []).append(row)
        keys = sorted(groups, key=lambda key: tuple(_sort_key(v) for v in key))
        need = self.train_per_cell + self.eval_per_cell
        for key in keys:
            if len(groups[key]) < need:
                raise CurriculumError(
                    f"curriculum.train_per_cell={self.train_per_cell} + curriculum.eval_per_cell={self.eval_per_cell} "
                    f"= {need} rows per cell, but cell {dict(zip(self.stratify_by, key))} has only "
                    f"{len(groups[key])} candidate rows; lower those two (experiment=travelplanner_train_rows sets 4 + 1, "
                    f"for the 45-row TravelPlanner train split)"
                )
        rng = random.Random(self.seed)
        train: list[TravelRow] = []
        eval_groups: list[list[TravelRow]] = []
        for key in keys:
            group = list(groups[key])
            rng.shuffle(group)
            eval_groups.append(group[: self.eval_per_cell])
            train.extend(group[self.eval_per_cell : need])
        rng.shuffle(train)
        if self.interleave_eval:
            evals = [eval_groups[g][i] for i in range(self.eval_per_cell) for g in range(len(keys))]
        else:
            evals = [row for group in eval_groups for row in group]
        if len(evals) % self.eval_panel_size:
            raise CurriculumError(
                f"curriculum.eval_panel_size={self.eval_panel_size} does not divide the {len(evals)} eval rows"
            )
        used = {row.source_index for row in (*train, *evals)}
        for key in keys:
            cell = ", ".join(f"{name}={value}" for name, value in zip(self.stratify_by, key))
            for row in groups[key]:
                if row.source_index not in used:
                    excluded[row.source_index] = (
                        f"unused: cell ({cell}) has {len(groups[key])} candidate rows, the split takes "
                        f"curriculum.train_per_cell + curriculum.eval_per_cell = {need}"
                    )
        held_out: dict[str, tuple[TravelRow, ...]] = {}
        if self.held_out_eval:
            rest = [row for row in rows if row.source_index not in used]
            held_out = {
                IN_CURRICULUM: tuple(row for row in rest if self.in_cells(row)),
                OUT_OF_CURRICULUM: tuple(row for row in rest if not self.in_cells(row)),
            }
        split = CurriculumSplit(
            tuple(candidates),
            tuple(train),
            tuple(evals),
            self.eval_panel_size,
            self.short_days,
            dict(sorted(excluded.items())),
            held_out,
        )
        if self.short_epochs and not split.short:
            raise CurriculumError(
                f"curriculum.short_days={list(self.short_days)}: no train row has that many days, "
                f"but curriculum.short_epochs={self.short_epochs}"
            )
        return split
