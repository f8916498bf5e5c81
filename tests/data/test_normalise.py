"""Row normalisation: targets dropped, fields parsed, malformed rows named (docs/curriculum.md "Row normalisation")."""

import copy
import json

import pytest

from travel.data.normalise import RowError, normalise_row


@pytest.fixture()
def raw_rows(shared_data_dir):
    with open(shared_data_dir / "train.jsonl") as handle:
        return [json.loads(line) for line in handle]


def test_rows_carry_parsed_fields_and_no_target(raw_rows):
    row = normalise_row(raw_rows[7], 7)
    assert row.id == "travelplanner-validation-7"
    assert row.source_index == 7
    assert row.dates == tuple(json.loads(raw_rows[7]["date"].replace("'", '"')))
    assert set(row.local_constraint) == {"house rule", "cuisine", "room type", "transportation"}
    assert "annotated_plan" in raw_rows[7]
    assert not hasattr(row, "annotated_plan") and "annotated_plan" not in row.extra
    assert "annotated_plan" not in repr(row)


def test_changing_the_annotated_plan_changes_nothing(raw_rows):
    raw = raw_rows[20]
    altered = copy.deepcopy(raw)
    altered["annotated_plan"] = "[{'days': 1, 'current_city': 'from Mars to Venus'}]"
    altered["gold_plan"] = "anything"
    first, second = normalise_row(raw, 20), normalise_row(altered, 20)
    assert repr(first) == repr(second)
    assert first.catalog == second.catalog
    assert first.scaffold == second.scaffold and first.required_slots == second.required_slots


@pytest.mark.parametrize("column", ["query", "days", "date", "reference_information", "budget", "level"])
def test_missing_column_names_row_and_field(raw_rows, column):
    raw = dict(raw_rows[3])
    del raw[column]
    with pytest.raises(RowError, match=rf"row 3: field '{column}': missing column"):
        normalise_row(raw, 3)


@pytest.mark.parametrize(
    "column, value, problem",
    [
        ("date", "['2022-03-16', 'not a date', '2022-03-18']", "not a YYYY-MM-DD date"),
        ("date", "[2022-03-16", "cannot parse"),
        ("date", "['2022-03-16']", "has 1 dates for a 3-day trip"),
        ("local_constraint", "{'cuisine': ", "cannot parse"),
        ("local_constraint", "['cuisine']", "expected a mapping"),
        ("reference_information", "[{'Description': 'x'}]", "record 0 lacks"),
        ("reference_information", "not a list", "not a list of Description/Content records"),
        ("days", "three", "expected an integer"),
        ("query", "   ", "is empty"),
    ],
)
def test_malformed_values_name_row_and_field(raw_rows, column, value, problem):
    raw = dict(raw_rows[0])
    raw[column] = value
    with pytest.raises(RowError) as error:
        normalise_row(raw, 11)
    assert f"row 11: field '{column}'" in str(error.value) and problem in str(error.value)


def test_literal_parsing_never_evaluates_code(raw_rows):
    raw = dict(raw_rows[0])
    raw["local_constraint"] = "__import__('os').system('echo pwned')"
    with pytest.raises(RowError, match="local_constraint"):
        normalise_row(raw, 0)
