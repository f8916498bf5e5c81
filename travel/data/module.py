"""DataModule: a row source plus a curriculum -> normalised rows, candidate/train/eval split, catalog checks."""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property
from typing import Any, Protocol

from travel.data.catalog import CatalogParseError
from travel.data.curriculum import CurriculumSplit, ScalableCurriculum
from travel.data.normalise import check_route, normalise_row
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
    def loaded(self) -> tuple[tuple[TravelRow, ...], dict[int, int]]:
        """The source's rows, normalised and checked, each query once: a row with the query text and reference
        information of an earlier one is dropped (source index -> the kept row's), so no query can be both
        trained on and evaluated."""
        split = getattr(self.source, "split_name", "validation")
        rows, first, duplicates = [], {}, {}
        for index, raw in enumerate(self.source.load_raw()):
            row = normalise_row(raw, index, split)
            key = (row.query, row.reference_information)
            if key in first:
                duplicates[index] = first[key]
                continue
            first[key] = index
            try:
                row.catalog
            except CatalogParseError:
                pass  # reported with the row's reason by catalog_failures / check_catalogs
            else:
                check_route(row)
            rows.append(row)
        return tuple(rows), duplicates

    @property
    def rows(self) -> tuple[TravelRow, ...]:
        return self.loaded[0]

    @property
    def duplicates(self) -> dict[int, int]:
        return self.loaded[1]

    @cached_property
    def split(self) -> CurriculumSplit:
        split = self.curriculum.split(self.rows)
        repeated = {
            index: f"duplicate of row {kept} (the same query and reference information): dropped"
            for index, kept in self.duplicates.items()
        }
        return replace(split, excluded={**split.excluded, **repeated}) if repeated else split

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
        """Fail, naming the rows, if any train, eval or held-out row's catalog cannot be parsed."""
        held_out = [row for rows in self.split.held_out.values() for row in rows]
        failures = self.catalog_failures((*self.split.train, *self.split.eval, *held_out))
        if failures:
            detail = "\n".join(f"  row {index}: {message}" for index, message in sorted(failures.items()))
            where = "train/eval/held-out (curriculum.held_out_eval)" if held_out else "train/eval"
            raise CatalogParseError(f"{len(failures)} {where} rows have unparsable reference catalogs:\n{detail}")
