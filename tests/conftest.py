"""Shared pytest fixtures: the real TravelPlanner files beside the repository, when present."""

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA_DIR = REPO_ROOT.parent / "shared" / "data" / "travelplanner"


def require_shared_data() -> Path:
    """The real data directory; skips the test where it is absent, fails when CI requires it."""
    if (SHARED_DATA_DIR / "train.jsonl").is_file():
        return SHARED_DATA_DIR
    reason = f"real TravelPlanner files not found at {SHARED_DATA_DIR}"
    if os.environ.get("TRAVEL_REQUIRE_SHARED_DATA") == "1":
        pytest.fail(reason + " (TRAVEL_REQUIRE_SHARED_DATA=1)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    return require_shared_data()


@pytest.fixture(scope="session")
def real_train_rows(shared_data_dir):
    from travel.data import load_rows

    return load_rows(str(shared_data_dir / "train.jsonl"))
