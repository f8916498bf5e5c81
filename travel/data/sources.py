"""Where raw rows come from: the Hugging Face hub at a pinned revision, or a local jsonl/csv/parquet file.

Sources return raw hub-format records; `travel.data.module.DataModule` normalises them. Both sources read
through `datasets`, so a local file behaves exactly like the hub split with the same columns.
"""

from __future__ import annotations

import tempfile
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

        where = f"data.path={str(self.path)!r}"
        if self.path.is_dir():
            raise DataSourceError(f"{where}: is a directory; give the jsonl, csv or parquet file inside it")
        if not self.path.is_file():
            raise DataSourceError(f"{where}: no such file")
        builder = _BUILDERS.get(self.path.suffix.lower())
        if builder is None:
            raise DataSourceError(
                f"{where}: unsupported extension {self.path.suffix!r}; use one of {', '.join(sorted(_BUILDERS))}"
            )
        if self.path.stat().st_size == 0:
            raise DataSourceError(f"{where}: the file is empty")
        if builder in ("json", "csv"):
            check_utf8(self.path, where)
        was_enabled = datasets.is_progress_bar_enabled()
        datasets.disable_progress_bars()
        # A fresh cache per load, kept in memory and removed afterwards: a file changed in place (same size and
        # mtime) is read anew, and no copy of it is left in ~/.cache/huggingface.
        with tempfile.TemporaryDirectory(prefix="travel-data-") as cache:
            try:
                dataset = datasets.load_dataset(
                    builder, data_files=str(self.path), split="train", cache_dir=cache, keep_in_memory=True
                )
            except Exception as exc:
                place = bad_line(self.path, builder)
                raise DataSourceError(f"{where}: cannot read it as {builder}{place}: {exc}") from exc
            finally:
                if was_enabled:
                    datasets.enable_progress_bars()
            return _records(dataset)


def check_utf8(path: Path, where: str) -> None:
    """A text file must be UTF-8 (a byte-order mark allowed): else an error naming its line and column."""
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DataSourceError(
            f"{where}: line {line}, column {column}: byte 0x{data[exc.start]:02x} is not UTF-8 text ({exc.reason})"
        ) from None


def bad_line(path: Path, builder: str) -> str:
    """Where a json-lines or csv file stops parsing (", line N (...)"), or "" when no line is to blame."""
    import csv
    import json

    if builder == "json":
        with path.open(encoding="utf-8", errors="replace") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    return f", line {number} ({exc})"
                if not isinstance(record, dict):
                    return f", line {number} (a {type(record).__name__}, not a JSON object)"
    if builder == "csv":
        with path.open(newline="", encoding="utf-8", errors="replace") as stream:
            reader = csv.reader(stream, strict=True)
            try:
                header = next(reader)
                for row in reader:
                    if len(row) != len(header):
                        return f", line {reader.line_num} ({len(row)} fields, the header has {len(header)})"
            except csv.Error as exc:
                return f", line {reader.line_num} ({exc})"
    return ""
