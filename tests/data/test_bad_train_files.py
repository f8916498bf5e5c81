"""The real train file's wrong variants (tests/data/bad_train_files.py) fail naming the row and field, or the
file's line; its benign variants load as the file itself does, and a duplicated query is kept once, never in
both train and eval."""

from __future__ import annotations

import pytest

from tests.data.bad_train_files import BENIGN, WRONG
from travel.data.curriculum import ScalableCurriculum
from travel.data.module import DataModule
from travel.data.sources import LocalSource


def data_module(path) -> DataModule:
    return DataModule(LocalSource(str(path)), ScalableCurriculum(train_per_cell=4, eval_per_cell=1))


@pytest.fixture(scope="module")
def train_bytes(shared_data_dir) -> bytes:
    return (shared_data_dir / "train.jsonl").read_bytes()


@pytest.mark.parametrize("name", sorted(name for name in WRONG if "duplicate" not in WRONG[name][1]))
def test_wrong_data_fails_naming_the_row_and_field(name, train_bytes, tmp_path):
    make, where = WRONG[name]
    path = tmp_path / "train.jsonl"
    path.write_bytes(make(train_bytes))
    with pytest.raises(ValueError if "line" not in where else RuntimeError) as raised:
        data_module(path).split
    assert where in str(raised.value), str(raised.value)


@pytest.mark.parametrize("name", sorted(name for name in WRONG if "duplicate" in WRONG[name][1]))
def test_a_repeated_query_is_loaded_once_and_named(name, train_bytes, tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_bytes(WRONG[name][0](train_bytes))
    data = data_module(path)
    split = data.split
    assert len(data.rows) == 45 and data.duplicates and all(kept < index for index, kept in data.duplicates.items())
    queries = lambda rows: {(row.query, row.reference_information) for row in rows}  # noqa: E731
    assert not queries(split.train) & queries(split.eval)
    for index, kept in data.duplicates.items():
        assert split.excluded[index].startswith(f"duplicate of row {kept} ")


@pytest.mark.parametrize("name", sorted(BENIGN))
def test_benign_differences_still_load(name, train_bytes, tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_bytes(BENIGN[name](train_bytes))
    original = tmp_path / "original.jsonl"
    original.write_bytes(train_bytes)
    ours, theirs = data_module(path).split, data_module(original).split
    assert [row.source_index for row in ours.train] == [row.source_index for row in theirs.train]
    assert [row.source_index for row in ours.eval] == [row.source_index for row in theirs.eval]


def test_every_real_row_loads(shared_data_dir):
    for name, count in (("train.jsonl", 45), ("validation_sample_3rows.jsonl", 3)):
        data = data_module(shared_data_dir / name)
        assert len(data.rows) == count and data.duplicates == {}
