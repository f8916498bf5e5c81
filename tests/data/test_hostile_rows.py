"""Bad local data fails loudly, naming the row and field or the file's line, and nothing is silently filled,
coerced or cached: a key missing from one row, invalid numbers, deep nesting, unreadable lines, a changed
file, and the rows the curriculum filters drop."""

import json
import os

import pytest

from tests.fixtures import fixture_raw
from travel.data import load_rows
from travel.data.curriculum import ScalableCurriculum
from travel.data.normalise import RowError
from travel.data.sources import DataSourceError, LocalSource


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def two_rows(**second):
    first = fixture_raw()
    other = {**fixture_raw(), **second}
    return [first, {k: v for k, v in other.items() if v is not ...}]


@pytest.mark.parametrize("field", ["local_constraint", "org", "dest", "level"])
def test_a_key_missing_from_one_row_names_the_row_and_field(tmp_path, field):
    path = write_jsonl(tmp_path / "rows.jsonl", two_rows(**{field: ...}))
    with pytest.raises(RowError, match=rf"row 1: field '{field}': missing in this row"):
        load_rows(str(path))


@pytest.mark.parametrize(
    "field, value",
    [("budget", float("nan")), ("budget", float("inf")), ("budget", 0), ("budget", -5), ("budget", True),
     ("people_number", 0), ("people_number", True)],
)
def test_invalid_numbers_name_the_row_and_field(tmp_path, field, value):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(fixture_raw()) + "\n" + json.dumps({**fixture_raw(), field: value}) + "\n")
    with pytest.raises(RowError, match=rf"row 1: field '{field}'"):
        load_rows(str(path))


@pytest.mark.parametrize("field", ["reference_information", "date", "local_constraint"])
def test_deep_nesting_is_a_row_error_not_a_recursion_error(tmp_path, field):
    path = write_jsonl(tmp_path / "rows.jsonl", [{**fixture_raw(), field: "[" * 5000 + "]" * 5000}])
    with pytest.raises(RowError, match=rf"row 0: field '{field}'"):
        load_rows(str(path))


@pytest.mark.parametrize(
    "name, text, where",
    [
        ("rows.jsonl", None, "line 2"),
        ("rows.jsonl", "", "the file is empty"),
        ("rows.csv", 'org,dest\n"Alpha,Beta\n', "line"),
    ],
)
def test_unreadable_files_name_the_line_or_the_problem(tmp_path, name, text, where):
    path = tmp_path / name
    if text is None:
        text = json.dumps(fixture_raw()) + "\n" + json.dumps(fixture_raw())[:40] + "\n"
    path.write_text(text)
    with pytest.raises(DataSourceError, match=where):
        LocalSource(str(path)).load_raw()


def test_a_directory_is_named_as_a_directory(tmp_path):
    with pytest.raises(DataSourceError, match="is a directory"):
        LocalSource(str(tmp_path)).load_raw()


def test_a_file_changed_in_place_with_the_same_size_and_mtime_is_read_anew(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))
    path = write_jsonl(tmp_path / "rows.jsonl", [fixture_raw(budget=1700)])
    stat = path.stat()
    assert load_rows(str(path))[0].budget == 1700
    path.write_text(path.read_text().replace('"budget": 1700', '"budget": 9999'))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    assert load_rows(str(path))[0].budget == 9999
    assert not (tmp_path / "hf_cache").exists() or not any((tmp_path / "hf_cache").rglob("*.arrow"))


def test_the_curriculum_names_every_row_it_leaves_out_and_why(real_train_rows):
    curriculum = ScalableCurriculum(days=[3, 5], levels=["easy", "medium"], visiting_city_numbers=[1, 2],
                                    train_per_cell=3, eval_per_cell=1, eval_panel_size=4)
    split = curriculum.split(real_train_rows)
    used = {row.source_index for row in (*split.train, *split.eval)}
    assert set(split.excluded) == {row.source_index for row in real_train_rows} - used
    unused = {row.source_index for row in split.candidates} - used
    assert unused and all(split.excluded[i].startswith("unused: cell (") for i in unused)
    by_days = [i for i, reason in split.excluded.items() if reason.startswith("days=7 not in curriculum.days")]
    assert by_days and all(real_train_rows[i].days == 7 for i in by_days)
    assert any("level='hard' not in curriculum.levels" in reason for reason in split.excluded.values())
