"""The Tracker: metrics.jsonl always, an allow-listed W&B surface on the env_step axis, read back offline."""

import json

import pytest

from tests.logging.wandb_files import history_rows, metric_definitions, offline_run_file
from travel.logging.tracker import Tracker, uploadable


def test_metrics_jsonl_keeps_every_record_and_survives_a_crash(tmp_path):
    tracker = Tracker(tmp_path)
    tracker.log({"eval/reward": 0.5, "train/loss": 1.25}, env_step=0)
    tracker.log({"turn_1/reward_mean": 0.25}, env_step=20)
    # no close(): each record is flushed as it is written
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert lines == [
        {"env_step": 0, "eval/reward": 0.5, "train/loss": 1.25},
        {"env_step": 20, "turn_1/reward_mean": 0.25},
    ]
    tracker.close()


@pytest.mark.parametrize(
    "key, allowed",
    [
        ("eval/reward", True),
        ("eval/collaboration_success", True),
        ("eval/grounding_f1", True),
        ("turn_1/reward_mean", True),
        ("turn_1/expected_return", True),
        ("iter/new_pairs", True),
        ("train/loss", False),
        ("eval_full/reward", False),
        ("eval/samples/table", False),
        ("turn_1/reward_std", False),
    ],
)
def test_upload_allow_list(key, allowed):
    assert uploadable(key) is allowed


def test_offline_wandb_run_reads_back_with_env_step_axis(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    with Tracker(tmp_path, mode="offline", name="tracker-test") as tracker:
        tracker.log({"eval/reward": 0.08, "eval_full/reward": 0.1, "train/loss": 3.0}, env_step=0)
        tracker.log({"turn_1/reward_mean": 0.2, "turn_1/expected_return": 0.2}, env_step=20)
        tracker.log({"eval/reward": 0.3}, env_step=20)  # same env_step: must not overwrite the turn record
        tracker.log({"iter/current_iteration": 1, "iter/new_pairs": 6}, env_step=40)
    rows = history_rows(offline_run_file(tmp_path))
    public = [{k: v for k, v in row.items() if not k.startswith("_")} for row in rows]
    assert public == [
        {"env_step": 0, "eval/reward": 0.08},
        {"env_step": 20, "turn_1/reward_mean": 0.2, "turn_1/expected_return": 0.2},
        {"env_step": 20, "eval/reward": 0.3},
        {"env_step": 40, "iter/current_iteration": 1, "iter/new_pairs": 6},
    ]
    assert [row["_history_step"] for row in rows] == [0, 1, 2, 3]  # no explicit step= anywhere
    definitions = metric_definitions(offline_run_file(tmp_path))
    assert definitions["env_step"].options.hidden and definitions["env_step"].summary.none
    assert definitions["eval/*"].step_metric == "env_step"
    assert definitions["turn_1/*"].step_metric == "env_step"
    assert definitions["iter/*"].step_metric == "iter/current_iteration"


def test_unknown_wandb_mode_names_the_option(tmp_path):
    with pytest.raises(ValueError, match="logger.mode='sometimes'"):
        Tracker(tmp_path, mode="sometimes")
