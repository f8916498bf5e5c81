"""Data: loading (hub, local files, synthetic), normalisation, reference catalogs, curriculum split,
route scaffold and required-slot mask."""

from __future__ import annotations

from travel.data.row import TravelRow


def load_rows(path: str, split: str = "validation") -> list[TravelRow]:
    """Normalised rows of a local jsonl, csv or parquet file with the hub's columns (annotated plans dropped)."""
    from travel.data.normalise import normalise_row
    from travel.data.sources import LocalSource

    return [normalise_row(raw, index, split) for index, raw in enumerate(LocalSource(path, split).load_raw())]


__all__ = ["TravelRow", "load_rows"]
