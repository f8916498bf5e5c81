"""Data: loading (hub, local files, synthetic), normalisation, reference catalogs, curriculum split,
route scaffold and required-slot mask."""

from __future__ import annotations

from travel.data.normalise import check_route, normalise_row
from travel.data.row import TravelRow
from travel.data.sources import LocalSource


def load_rows(path: str, split: str = "validation") -> list[TravelRow]:
    """Normalised rows of a local jsonl, csv or parquet file with the hub's columns: annotated plans dropped,
    dates, constraints and the reference catalog parsed (an error names the row and field that fail)."""

    rows = [normalise_row(raw, index, split) for index, raw in enumerate(LocalSource(path, split).load_raw())]
    for row in rows:
        row.catalog  # parse now so a malformed reference fails here, naming the row
        check_route(row)
    return rows


__all__ = ["TravelRow", "load_rows"]
