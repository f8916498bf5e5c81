"""Variants of the real 45-row train file, each built from its bytes in memory (no file is kept): wrong data that
must fail naming the row and field (or the file's line), and benign differences that must still load.

`WRONG[name] = (make, where)`: `make(data) -> bytes` of the variant; `where` the text its error must hold.
`BENIGN[name] = make`."""

from __future__ import annotations

import json
from typing import Callable

Make = Callable[[bytes], bytes]


def _rows(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def _file(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode("utf-8")


def _edit(index: int, **changes) -> Make:
    """Row `index` with `changes` ({field: value}, or {field: callable(old value)})."""

    def make(data: bytes) -> bytes:
        rows = _rows(data)
        for field, change in changes.items():
            rows[index][field] = change(rows[index][field]) if callable(change) else change
        return _file(rows)

    return make


def _dates(index: int, change: Callable[[list[str]], list[str]]) -> Make:
    def make(data: bytes) -> bytes:
        rows = _rows(data)
        dates = json.loads(rows[index]["date"].replace("'", '"'))
        rows[index]["date"] = str(change(dates))
        return _file(rows)

    return make


def _duplicate_row(index: int) -> Make:
    def make(data: bytes) -> bytes:
        rows = _rows(data)
        return _file([*rows, rows[index]])

    return make


def _doubled(data: bytes) -> bytes:
    return data + data


def _byte_at(line: int, column: int, byte: bytes) -> Make:
    def make(data: bytes) -> bytes:
        lines = data.split(b"\n")
        lines[line] = lines[line][:column] + byte + lines[line][column + 1:]
        return b"\n".join(lines)

    return make


def _one_city_row(data: bytes) -> int:
    return next(i for i, row in enumerate(_rows(data)) if int(row["visiting_city_number"]) == 1)


def _years_apart(dates: list[str]) -> list[str]:
    return [f"{2022 + 3 * i}{date[4:]}" for i, date in enumerate(dates)]


WRONG: dict[str, tuple[Make, str]] = {
    # the nine that loaded silently
    "duplicated row 3": (_duplicate_row(3), "duplicate"),
    "the file twice": (_doubled, "duplicate"),
    "reversed dates": (_dates(0, lambda dates: dates[::-1]), "row 0: field 'date': day 2"),
    "the same date every day": (_dates(0, lambda dates: [dates[0]] * len(dates)), "row 0: field 'date': day 2"),
    "dates years apart": (_dates(0, _years_apart), "row 0: field 'date': day 2"),
    "two cities on a one-city row": (_edit(0, visiting_city_number=2), "row 0: field 'visiting_city_number': 2, but the route"),
    "an empty org": (_edit(0, org=" "), "row 0: field 'org': is empty"),
    "a dest of Atlantis": (_edit(0, dest="Atlantis"), "row 0: field 'dest': 'Atlantis', but the route"),
    # the two that crashed naming nothing
    "a byte that is not UTF-8": (_byte_at(5, 40, b"\xff"), "line 6, column 41: byte 0xff is not UTF-8"),
    "a budget of 1e308": (_edit(0, budget=1e308), "row 0: field 'budget'"),
    # the one whose error missed the cause
    "level insane": (_edit(0, level="insane"), "row 0: field 'level': expected one of easy, medium, hard"),
}

WRONG["org equal to dest"] = (lambda data: _file([{**row, "dest": row["org"]} if i == 0 else row for i, row in enumerate(_rows(data))]), "row 0: field 'dest'")

BENIGN: dict[str, Make] = {
    "a budget as a string": _edit(0, budget=lambda budget: str(budget)),
    "a people count as a string": _edit(0, people_number=lambda people: str(people)),
    "spacing and case in the level": _edit(0, level=lambda level: f"  {level.upper()} "),
    "a byte-order mark": lambda data: b"\xef\xbb\xbf" + data,
    "CRLF line ends": lambda data: data.replace(b"\n", b"\r\n"),
    "a large valid reference": _edit(0, reference_information=lambda text: text[:-1] + (", " + text[1:-1]) * 20 + "]"),
}
