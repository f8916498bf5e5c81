"""Where raw rows come from: the Hugging Face hub at a pinned revision, or a local jsonl/csv/parquet file.

Sources return raw hub-format records; `travel.data.module.DataModule` normalises them. Both sources read
through `datasets`, so a local file behaves exactly like the hub split with the same columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


class DataSourceError(RuntimeError):
    """Rows could not be loaded; the message says what was tried and which override to use instead."""


def _records(dataset) -> list[dict[str, Any]]:
    return [dict(record) for record in dataset]


class HubSource:
    """`datasets.load_dataset(name, config_name, split=split, revision=revision)`."""

    def __init__(self, name: str, config_name: str, split: str, revision: str):
        self.name, self.config_name, self.split, self.revision = name, config_name, split, revision

    @property
    def split_name(self) -> str:
        return self.split

    def describe(self) -> str:
        return f"hub {self.name} ({self.config_name}/{self.split} @ {self.revision[:12]})"

    def load_raw(self) -> list[dict[str, Any]]:
        import datasets

        try:
            dataset = datasets.load_dataset(self.name, self.config_name, split=self.split, revision=self.revision)
        except Exception as exc:  # datasets raises many types for an unreachable hub or a missing cache
            raise DataSourceError(
                f"could not load {self.name!r} (config {self.config_name!r}, split {self.split!r}, revision "
                f"{self.revision}) from the Hugging Face hub: {type(exc).__name__}: {exc}\n"
                "If the hub cannot be reached, use a local copy with the hub's columns instead:\n"
                "  python launch.py data=local data.path=/path/to/validation.jsonl\n"
                "or the offline generator: python launch.py data=synthetic"
            ) from exc
        return _records(dataset)


class LocalSource:
    """A local .jsonl/.json, .csv or .parquet file with the hub's columns, read through `datasets`."""

    def __init__(self, path: str, split: str = "validation"):
        if not path:
            raise DataSourceError("data=local needs a file: add data.path=/path/to/rows.jsonl (jsonl, csv or parquet)")
        self.path = Path(path).expanduser()
        self.split = split

    @property
    def split_name(self) -> str:
        return self.split

    def describe(self) -> str:
        return f"local file {self.path}"

    def load_raw(self) -> list[dict[str, Any]]:
        import datasets

        if not self.path.is_file():
            raise DataSourceError(f"data.path={str(self.path)!r}: no such file")
        builder = _BUILDERS.get(self.path.suffix.lower())
        if builder is None:
            raise DataSourceError(
                f"data.path={str(self.path)!r}: unsupported extension {self.path.suffix!r}; "
                f"use one of {', '.join(sorted(_BUILDERS))}"
            )
        was_enabled = datasets.is_progress_bar_enabled()
        datasets.disable_progress_bars()
        try:
            dataset = datasets.load_dataset(builder, data_files=str(self.path), split="train")
        except Exception as exc:
            raise DataSourceError(f"data.path={str(self.path)!r}: cannot read it as {builder}: {exc}") from exc
        finally:
            if was_enabled:
                datasets.enable_progress_bars()
        return _records(dataset)
