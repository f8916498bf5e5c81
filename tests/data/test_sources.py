"""Row sources: local jsonl/csv/parquet through `datasets`, and a clear error when the hub is unreachable."""

import os
import subprocess
import sys

import pandas as pd
import pytest

from travel.data import load_rows
from travel.data.sources import DataSourceError, LocalSource


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_local_formats_give_the_same_rows_as_jsonl(shared_data_dir, tmp_path, suffix):
    jsonl = shared_data_dir / "train.jsonl"
    frame = pd.read_json(jsonl, lines=True)
    path = tmp_path / f"train{suffix}"
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path, index=False)
    expected = [repr(row) for row in load_rows(str(jsonl))]
    assert [repr(row) for row in load_rows(str(path))] == expected
    assert len(expected) == 45


def test_validation_sample_rows_load(shared_data_dir):
    rows = load_rows(str(shared_data_dir / "validation_sample_3rows.jsonl"))
    assert [(r.days, r.level, r.org) for r in rows] == [
        (3, "easy", "St. Petersburg"),
        (5, "easy", "Killeen"),
        (7, "easy", "Indianapolis"),
    ]


def test_unknown_extension_and_missing_file_name_the_option(tmp_path):
    with pytest.raises(DataSourceError, match=r"data\.path=.*unsupported extension '\.txt'"):
        LocalSource(str(tmp_path / "rows.txt")).load_raw() if (tmp_path / "rows.txt").write_text("x") else None
    with pytest.raises(DataSourceError, match=r"data\.path=.*no such file"):
        LocalSource(str(tmp_path / "absent.jsonl")).load_raw()


def test_unreachable_hub_says_so_and_shows_the_local_override(tmp_path):
    # A fresh interpreter: the hub libraries read their offline switches at import time.
    code = (
        "from travel.data.sources import HubSource\n"
        "HubSource('osunlp/TravelPlanner', 'validation', 'validation', "
        "'8736504ecfc31b7f8b7e40122873c337e83fff7c').load_raw()\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "DataSourceError" in result.stderr
    assert "osunlp/TravelPlanner" in result.stderr and "8736504ecfc31b7f8b7e40122873c337e83fff7c" in result.stderr
    assert "data=local data.path=" in result.stderr
