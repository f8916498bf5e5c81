"""Iteration reward distributions: 16 bins over the declared range, JSON every iteration, iter/* surface."""

import json
import xml.etree.ElementTree as ElementTree

import pytest

from tests.logging.wandb_files import history_rows, offline_run_file
from travel.algorithms.preference.batch import (
    COMPARATOR,
    TARGET,
    CandidateRef,
    JointCandidate,
    PreferenceBatch,
    PreferencePair,
    TokenSequence,
)
from travel.logging.reward_distributions import (
    COMPARATOR_COLOUR,
    TARGET_COLOUR,
    iteration_distribution,
    iteration_plots,
    log_iteration,
    series,
)
from travel.logging.tracker import Tracker
from travel.reward import REWARD_RANGE

WIDTH = 1.25 / 16  # bin width over [-0.25, 1.0]


def pair(winner, loser, winner_reward, loser_reward):
    side = JointCandidate(texts=("a", "b"), sequences=(TokenSequence((1,), (1,)), TokenSequence((2,), (1,))))
    return PreferencePair(0, winner, loser, side, side, winner_reward, loser_reward, candidate_mean=0.0)


def selected_batch():
    pairs = (
        pair(CandidateRef(TARGET, 2), CandidateRef(COMPARATOR, 2), 0.5, 0.1),
        pair(CandidateRef(COMPARATOR, 0), CandidateRef(TARGET, 0), 1.0, 0.08),
    )
    return PreferenceBatch("decentralized", pairs, {0: ((5,), (6,))})


def test_sixteen_bins_over_the_declared_reward_range_with_clipping():
    assert REWARD_RANGE == (-0.25, 1.0)
    result = series([-0.25, 0.08, 1.0, -3.0, 7.0, 0.0], REWARD_RANGE)
    expected = [0] * 16
    expected[0] += 2  # -0.25 and the clipped -3.0
    expected[int((0.08 + 0.25) / WIDTH)] += 1  # bin 4
    expected[int((0.0 + 0.25) / WIDTH)] += 1  # bin 3 (0.25 / 0.078125 = 3.2)
    expected[15] += 2  # 1.0 sits on the closed last edge, 7.0 is clipped to it
    assert result["counts"] == expected
    assert result["sample_count"] == 6 and result["raw_rewards"][3] == -3.0
    assert result["mean"] == pytest.approx((-0.25 + 0.08 + 1.0 - 3.0 + 7.0 + 0.0) / 6)
    assert series([], REWARD_RANGE) == {"sample_count": 0, "mean": None, "counts": [0] * 16, "raw_rewards": []}


def test_payload_fields_and_selected_rewards_by_pool():
    payload = iteration_distribution(2, [0.0, 0.5, 0.2], [0.08, 1.0], selected_batch(), REWARD_RANGE)
    assert payload["iteration"] == 2 and payload["num_bins"] == 16
    assert (payload["reward_min"], payload["reward_max"]) == (-0.25, 1.0)
    assert len(payload["bin_edges"]) == 17 and payload["bin_edges"][0] == -0.25 and payload["bin_edges"][-1] == 1.0
    assert payload["bin_centers"][0] == pytest.approx(-0.25 + WIDTH / 2) and len(payload["bin_centers"]) == 16
    assert payload["candidate"]["target"]["raw_rewards"] == [0.0, 0.5, 0.2]
    assert payload["candidate"]["comparator"]["sample_count"] == 2
    assert payload["selected"]["target"]["raw_rewards"] == [0.5, 0.08]
    assert payload["selected"]["comparator"]["raw_rewards"] == [0.1, 1.0]
    assert payload["pair_count"] == 2


def test_the_declared_range_sets_the_bins_not_the_data():
    payload = iteration_distribution(1, [0.5], [0.5], PreferenceBatch("decentralized"), (0.0, 2.0))
    assert payload["bin_edges"][0] == 0.0 and payload["bin_edges"][-1] == 2.0
    assert payload["candidate"]["target"]["counts"][4] == 1  # 0.5 / 0.125


def test_plots_are_small_inline_svgs_in_both_colours():
    payload = iteration_distribution(3, [0.0, 0.5], [0.08], selected_batch(), REWARD_RANGE)
    plots = iteration_plots(payload)
    assert sorted(plots) == sorted(
        f"iter/{name}/iteration_0003/{style}_plot"
        for name in ("reward_distribution", "selected_reward_distribution")
        for style in ("line", "bar")
    )
    for svg in plots.values():
        root = ElementTree.fromstring(svg)
        assert (root.get("width"), root.get("height")) == ("240", "80")
        assert TARGET_COLOUR in svg and COMPARATOR_COLOUR in svg


def log(tracker, tmp_path, iteration, enabled=True, env_step=40):
    return log_iteration(
        tracker,
        env_step=env_step,
        iteration=iteration,
        new_pairs=2,
        total_pairs=5,
        selected=selected_batch(),
        target_rewards=[0.0, 0.5],
        comparator_rewards=[0.08, 1.0],
        reward_range=REWARD_RANGE,
        run_dir=tmp_path,
        log_distribution=enabled,
    )


def test_json_is_written_every_iteration_without_wandb(tmp_path):
    with Tracker(tmp_path) as tracker:
        paths = [log(tracker, tmp_path, iteration) for iteration in (1, 2)]
    assert [p.relative_to(tmp_path).as_posix() for p in paths] == [
        "reward_distributions/iteration_0001.json",
        "reward_distributions/iteration_0002.json",
    ]
    saved = json.loads(paths[1].read_text())
    assert saved["iteration"] == 2 and saved["num_bins"] == 16 and len(saved["bin_edges"]) == 17
    assert not list((tmp_path / "reward_distributions").glob("*.tmp"))
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert records[1]["iter/current_iteration"] == 2 and records[1]["iter/train_preference_pairs"] == 2
    assert records[1]["iter/total_preference_pairs"] == 5 and records[1]["iter/current_preference_pairs"] == 2
    assert records[1]["iter/selected_reward_distribution/pair_count"] == 2
    assert records[1]["iter/reward_distribution/target_mean"] == 0.25


def test_disabled_distributions_keep_only_counters_and_write_no_directory(tmp_path):
    with Tracker(tmp_path) as tracker:
        assert log(tracker, tmp_path, 1, enabled=False) is None
    (record,) = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert sorted(record) == sorted(
        [
            "env_step",
            "iter/current_iteration",
            "iter/current_preference_pairs",
            "iter/total_preference_pairs",
            "iter/train_preference_pairs",
        ]
    )
    assert not (tmp_path / "reward_distributions").exists()


def test_wandb_gets_iteration_scalars_and_plots_on_the_iteration_axis(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    with Tracker(tmp_path, mode="offline", name="distributions-test") as tracker:
        tracker.log({"eval/reward": 0.3}, env_step=40)
        log(tracker, tmp_path, 1, env_step=40)  # same env step as the eval: neither may drop the other
    rows = history_rows(offline_run_file(tmp_path))
    assert [row["_history_step"] for row in rows] == [0, 1, 2]
    assert all(row["env_step"] == 40 for row in rows)
    assert rows[0]["eval/reward"] == 0.3
    assert rows[1]["iter/current_iteration"] == 1 and rows[1]["iter/reward_distribution/comparator_mean"] == 0.54
    assert rows[2]["iter/current_iteration"] == 1
    for plot in (
        "iter/reward_distribution/iteration_0001/bar_plot",
        "iter/selected_reward_distribution/iteration_0001/line_plot",
    ):
        assert rows[2][f"{plot}/_type"] == "html-file"
