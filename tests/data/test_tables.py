"""Fixed-width table reader: pandas round trips, index detection, layout errors, every real table."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import require_shared_data
from travel.data.tables import TableLayoutError, read_fixed_width_table
from travel.data.text import literal

DATA_DIR = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "travelplanner"

# ------------------------------------------------------------------------------ pandas round trips

_WORD_CHARS = "abcXYZ019,&'.$-/#()"
_words = st.text(alphabet=_WORD_CHARS, min_size=1, max_size=8)
# Values with internal spaces (runs of them too), digits, commas and '&'; no leading/trailing blank.
_values = st.lists(_words, min_size=1, max_size=5).flatmap(
    lambda words: st.lists(st.sampled_from([" ", "  ", "   "]), min_size=len(words) - 1, max_size=len(words) - 1).map(
        lambda gaps: words[0] + "".join(g + w for g, w in zip(gaps, words[1:]))
    )
)
_first_values = st.builds(lambda head, tail: head + tail, st.sampled_from("ABCxyz"), st.text(_WORD_CHARS + " ", max_size=20)).map(
    str.rstrip
)
COLUMNS = ("Name", "Average Cost", "Cuisines", "room type", "City")


@st.composite
def _frames(draw, with_index: bool):
    n = draw(st.integers(min_value=1, max_value=6))
    frame = pd.DataFrame(
        {
            "Name": draw(st.lists(_values if with_index else _first_values, min_size=n, max_size=n)),
            "Average Cost": draw(st.lists(st.integers(-50, 100_000), min_size=n, max_size=n)),
            "Cuisines": draw(st.lists(_values, min_size=n, max_size=n)),
            "room type": draw(st.lists(st.sampled_from(["Private room", "Entire home/apt", "x"]), min_size=n, max_size=n)),
            "City": draw(st.lists(_values, min_size=n, max_size=n)),
        },
        index=draw(st.lists(st.integers(0, 99_999), min_size=n, max_size=n, unique=True)),
    )
    return frame


def _expected(frame: pd.DataFrame) -> list[dict[str, str]]:
    return [{c: str(v) for c, v in record.items()} for record in frame.to_dict("records")]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_frames(with_index=False))
def test_round_trip_without_index(frame: pd.DataFrame) -> None:
    table = read_fixed_width_table(frame.to_string(index=False), COLUMNS)
    assert not table.has_index
    assert [dict(row.values) for row in table.rows] == _expected(frame)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_frames(with_index=True))
def test_round_trip_with_left_justified_index(frame: pd.DataFrame) -> None:
    table = read_fixed_width_table(frame.to_string(), COLUMNS)
    assert table.has_index
    assert [row.index for row in table.rows] == [str(i) for i in frame.index]
    assert [dict(row.values) for row in table.rows] == _expected(frame)


def test_values_wider_than_headers_and_names_starting_with_numbers_stay_whole() -> None:
    frame = pd.DataFrame(
        {
            "Name": ["1918 Bistro & Grill", "Coconuts Fish Cafe", "$2,800"],
            "Average Cost": [90, 38, 7],
            "Cuisines": ["Tea, Pizza, BBQ, Seafood", "Cafe", "BBQ"],
            "room type": ["a", "b", "c"],
            "City": ["Dallas", "Dallas", "El Paso"],
        }
    )
    table = read_fixed_width_table(frame.to_string(index=False), COLUMNS)
    assert not table.has_index
    assert [row["Name"] for row in table.rows] == ["1918 Bistro & Grill", "Coconuts Fish Cafe", "$2,800"]
    assert [row["City"] for row in table.rows] == ["Dallas", "Dallas", "El Paso"]


def test_trailing_blank_in_a_value_is_kept_inside_its_cell_and_stripped() -> None:
    frame = pd.DataFrame({"Name": ["Mouthmatics ", "Phantom"], "Average Cost": [56, 94], "City": ["Pensacola"] * 2})
    table = read_fixed_width_table(frame.to_string(), ("Name", "Average Cost", "City"))
    assert [(row.index, row["Name"], row["Average Cost"]) for row in table.rows] == [
        ("0", "Mouthmatics", "56"),
        ("1", "Phantom", "94"),
    ]


def test_blank_cells_and_blank_lines() -> None:
    content = "   A  B C\n\n   x  1 z\n      2  \n"
    table = read_fixed_width_table(content, ("A", "B", "C"))
    assert [dict(r.values) for r in table.rows] == [{"A": "x", "B": "1", "C": "z"}, {"A": "", "B": "2", "C": ""}]
    assert [r.line_number for r in table.rows] == [3, 4]


def test_header_names_match_case_insensitively_and_give_right_edges() -> None:
    header = "  name   average cost"  # "name" spans 2..5, "average cost" spans 9..20
    table = read_fixed_width_table(header + "\n" + "abc".rjust(6) + " " + "5".rjust(14), ("Name", "Average Cost"))
    assert table.right_edges == (5, 20)
    assert table.rows[0]["Name"] == "abc"
    assert table.rows[0]["Average Cost"] == "5"


# ------------------------------------------------------------------------------------ layout errors


def test_header_with_other_columns_is_rejected() -> None:
    with pytest.raises(TableLayoutError, match=r"header does not list .*line 1"):
        read_fixed_width_table("Name  Price\n   a      1", ("Name", "Average Cost"))


def test_blank_content_is_rejected() -> None:
    with pytest.raises(TableLayoutError, match="blank"):
        read_fixed_width_table(" \n\n", ("Name",))


def test_value_running_over_a_separator_is_rejected() -> None:
    header = "Name".rjust(9) + " " + "Average Cost"  # Name ends at 8, separator at 9
    good = "abcd".rjust(9) + " " + "5".rjust(12)
    spilled = "Long name!" + "5".rjust(12)  # ten characters: the "!" sits on the separator
    content = "\n".join([header, good, spilled])
    with pytest.raises(TableLayoutError, match=r"separator before column 'Average Cost'.*line 3: 'Long name!"):
        read_fixed_width_table(content, ("Name", "Average Cost"))


def test_line_longer_than_the_header_is_rejected() -> None:
    with pytest.raises(TableLayoutError, match=r"past the header.*line 2"):
        read_fixed_width_table("Name City\n  ab   xyzw", ("Name", "City"))


def test_index_without_blank_separator_is_rejected() -> None:
    # Every line starts with a number, so the table is indexed (index width 5); line 3's name starts
    # inside the index column.
    header = "Name".rjust(12) + " " + "Cost"
    good = "12345" + " " + "Alpha".rjust(6) + " " + "1".rjust(4)
    shifted = "7 Alpha xxxx" + " " + "2".rjust(4)
    with pytest.raises(TableLayoutError, match=r"index column is not followed by a blank separator.*line 3"):
        read_fixed_width_table("\n".join([header, good, shifted]), ("Name", "Cost"))


def test_leading_numbers_wider_than_the_header_blank_are_not_an_index() -> None:
    # Both lines start with a number, but "1234 " does not fit in the header's 4 leading blanks.
    header = "Name".rjust(8) + " " + "Cost"
    lines = ["1234 abc" + " " + "1".rjust(4), "5678 xyz" + " " + "2".rjust(4)]
    table = read_fixed_width_table("\n".join([header, *lines]), ("Name", "Cost"))
    assert not table.has_index
    assert [row["Name"] for row in table.rows] == ["1234 abc", "5678 xyz"]


# ------------------------------------------------------------------------------- every real table

HEADERS = {
    "Restaurants": ("Name", "Average Cost", "Cuisines", "Aggregate Rating", "City"),
    "Attractions": ("Name", "Latitude", "Longitude", "Address", "Phone", "Website", "City"),
    "Accommodations": (
        "NAME", "price", "room type", "house_rules", "minimum nights", "maximum occupancy", "review rate number", "city",
    ),
    "Flight": (
        "Flight Number", "Price", "DepTime", "ArrTime", "ActualElapsedTime", "FlightDate", "OriginCityName",
        "DestCityName", "Distance",
    ),
}
NUMERIC = {"Average Cost", "Aggregate Rating", "Latitude", "Longitude", "price", "minimum nights",
           "maximum occupancy", "review rate number", "Price", "Distance"}  # fmt: skip


def _real_tables():
    require_shared_data()
    import json

    for name in ("train.jsonl", "validation_sample_3rows.jsonl"):
        for number, line in enumerate((DATA_DIR / name).read_text().splitlines()):
            for record in literal(json.loads(line)["reference_information"]):
                kind = record["Description"].split()[0]
                if kind in HEADERS and record["Content"].startswith(("Flight Number", " ", "Name", "NAME")):
                    yield f"{name}:{number}:{record['Description']}", kind, record


def test_every_real_table_splits_into_its_columns() -> None:
    tables = 0
    for where, kind, record in _real_tables():
        tables += 1
        table = read_fixed_width_table(record["Content"], HEADERS[kind])
        lines = [l for l in record["Content"].split("\n") if l.strip()]
        assert len(table.rows) == len(lines) - 1, where
        city = record["Description"].split(" in ", 1)[1] if " in " in record["Description"] else None
        for row in table.rows:
            cells = ([row.index] if row.index is not None else []) + list(row.values.values())
            # Nothing lost or duplicated: the cells rebuild the line up to whitespace.
            assert " ".join(" ".join(cells).split()) == " ".join(row.text.split()), (where, row.text)
            for column in NUMERIC & set(HEADERS[kind]):
                assert re.fullmatch(r"-?\d+(\.\d+)?", row[column]), (where, column, row.text)
            if city is not None:
                assert row[HEADERS[kind][-1]] == city, (where, row.text)
            if kind == "Flight":
                assert re.fullmatch(r"F\d+", row["Flight Number"]) and re.fullmatch(
                    r"\d{4}-\d{2}-\d{2}", row["FlightDate"]
                ), (where, row.text)
        assert table.has_index == all(re.match(r"\d+ ", l) for l in lines[1:]), where
    assert tables == 96 * 3 + 67
