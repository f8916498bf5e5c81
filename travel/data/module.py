"""DataModule: a row source plus a curriculum -> normalised rows, candidate/train/eval split, catalog checks."""

from __future__ import annotations

from functools import cached_property
from typing import Any, Protocol

from travel.data.catalog import CatalogParseError
from travel.data.curriculum import CurriculumSplit, ScalableCurriculum
from travel.data.normalise import normalise_row
from travel.data.row import TravelRow


class RowSource(Protocol):
    split_name: str

    def describe(self) -> str: ...

    def load_raw(self) -> list[dict[str, Any]]: ...


class DataModule:
    def __init__(self, source: RowSource, curriculum: ScalableCurriculum):
        self.source = source
        self.curriculum = curriculum

    @cached_property
    def rows(self) -> tuple[TravelRow, ...]:
        split = getattr(self.source, "split_name", "validation")
        return tuple(normalise_row(raw, index, split) for index, raw in enumerate(self.source.load_raw()))

    @cached_property
    def split(self) -> CurriculumSplit:
        return self.curriculum.split(self.rows)

    def catalog_failures(self, rows) -> dict[int, str]:
        """source_index -> error message for every row whose reference catalog does not parse."""
        failures = {}
        for row in rows:
            try:
                row.catalog
            except CatalogParseError as exc:
                failures[row.source_index] = str(exc)
        return failures

    def check_catalogs(self) -> None:
        """Fail, naming the rows, if any train or eval row's catalog cannot be parsed."""
        failures = self.catalog_failures((*self.split.train, *self.split.eval))
        if failures:
            detail = "\n".join(f"  row {index}: {message}" for index, message in sorted(failures.items()))
            raise CatalogParseError(f"{len(failures)} train/eval rows have unparsable reference catalogs:\n{detail}")
