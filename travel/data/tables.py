"""Column-wise reader for the fixed-width tables that pandas `DataFrame.to_string()` writes.

Layout read here (pandas' defaults, checked on every real reference record):
- the first non-blank line is the header; every column (header and values) is right-justified to
  the column's right edge, so a header name's last character marks that edge;
- columns are joined by one space, so the character after each right edge is a separator;
- an unnamed index, when present, is an extra leading column with a blank header whose values are
  LEFT-justified (e.g. restaurants: "522   Beijing Cafe      33 ...").

Header names can contain spaces ("Average Cost", "room type"), so the caller names the columns it
expects and the reader locates them in the header. Each data line is then cut at the header's edges
and checked: no line runs past the last edge and every separator position is blank, so a value that
spilled into a neighbouring column raises TableLayoutError instead of being split in the wrong
place. A cell need not end exactly at its edge: source values can carry trailing blanks (a real
restaurant is "Mouthmatics "), which pandas keeps inside the right-justified cell; cells are stripped.

Index detection: the table has an index column iff every data line starts at column 0 with a run of
digits followed by a space and those runs fit inside the header's leading blank. (A one-row table
without an index whose only first-column value begins with a standalone number and is wider than
the header is indistinguishable from an indexed row; pandas output gives no way to tell them apart.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

_INDEX_TOKEN = re.compile(r"\d+(?= )")


class TableLayoutError(ValueError):
    """A table whose header or a data line does not fit the fixed-width layout."""

    def __init__(self, problem: str, line_number: int | None = None, line: str | None = None):
        where = f" (line {line_number}: {line!r})" if line_number is not None else ""
        super().__init__(problem + where)
        self.problem, self.line_number, self.line = problem, line_number, line


@dataclass(frozen=True)
class TableRow:
    line_number: int  # 1-based line number inside the content
    text: str
    values: Mapping[str, str]  # expected column name -> stripped cell text ("" for a blank cell)
    index: str | None = None

    def __getitem__(self, column: str) -> str:
        return self.values[column]


@dataclass(frozen=True)
class FixedWidthTable:
    columns: tuple[str, ...]
    right_edges: tuple[int, ...]  # position of each column's last character
    index_width: int  # 0 when the table has no index column
    rows: tuple[TableRow, ...]

    @property
    def has_index(self) -> bool:
        return self.index_width > 0


def _header_pattern(columns: Sequence[str]) -> re.Pattern[str]:
    names = " +".join(f"({re.escape(name)})" for name in columns)
    return re.compile(rf" *{names}", re.IGNORECASE)


def locate_columns(header: str, columns: Sequence[str]) -> tuple[int, tuple[int, ...]]:
    """(start of the first name, right edge of every name) for a header listing exactly `columns`."""
    if not columns:
        raise ValueError("a table needs at least one expected column")
    match = _header_pattern(columns).fullmatch(header.rstrip())
    if match is None:
        raise TableLayoutError(f"header does not list exactly the columns {list(columns)}", 1, header)
    return match.start(1), tuple(match.end(group) - 1 for group in range(1, len(columns) + 1))


def _index_width(lines: Sequence[str], first_name_start: int) -> int:
    tokens = [_INDEX_TOKEN.match(line) for line in lines]
    if not lines or not all(tokens):
        return 0
    width = max(token.end() for token in tokens)  # type: ignore[union-attr]
    # The index column and its separator sit under the header's leading blank.
    return width if width + 1 <= first_name_start else 0


def _cut_line(
    line: str, number: int, columns: Sequence[str], edges: Sequence[int], index_width: int
) -> TableRow:
    width = edges[-1] + 1
    if len(line) > width:
        raise TableLayoutError(f"data line is {len(line)} characters, past the header's {width}", number, line)
    padded = line.ljust(width)  # trailing blanks were stripped; a blank last cell is ""
    index = None
    left = 0
    if index_width:
        index = padded[:index_width].strip()
        if padded[index_width] != " ":
            raise TableLayoutError("index column is not followed by a blank separator", number, line)
        left = index_width + 1
    values: dict[str, str] = {}
    for position, (name, edge) in enumerate(zip(columns, edges)):
        if position > 0:
            separator = edges[position - 1] + 1
            if padded[separator] != " ":
                raise TableLayoutError(
                    f"no blank separator before column {name!r} at position {separator}", number, line
                )
            left = separator + 1
        values[name] = padded[left : edge + 1].strip()
    return TableRow(line_number=number, text=line, values=values, index=index)


def read_fixed_width_table(content: str, columns: Sequence[str]) -> FixedWidthTable:
    """Read a `to_string()` table whose header lists exactly `columns` (in order, case-insensitive).

    Blank lines are skipped. Raises TableLayoutError naming the line for any layout violation.
    """
    numbered = [(n, line.rstrip()) for n, line in enumerate(content.splitlines(), start=1) if line.strip()]
    if not numbered:
        raise TableLayoutError("content is blank; expected a header line")
    header_number, header = numbered[0]
    try:
        first_start, edges = locate_columns(header, columns)
    except TableLayoutError as exc:
        raise TableLayoutError(exc.problem, header_number, header) from None
    data = numbered[1:]
    index_width = _index_width([line for _, line in data], first_start)
    rows = tuple(_cut_line(line, number, columns, edges, index_width) for number, line in data)
    return FixedWidthTable(columns=tuple(columns), right_edges=edges, index_width=index_width, rows=rows)
