"""Budgets of all five algorithms (docs/algorithms.md "Budgets of the default configs") and the dry run that
reports them."""

import io
import json
from contextlib import redirect_stdout

import pytest

from tests.conftest import compose_config
from tests.data.test_curriculum import validation_layout_rows
from travel.algorithms.core.config import AlgorithmConfigError
from travel.algorithms.core.registry import algorithm_config, spec_for
from travel.algorithms.preference.comparators import ComparatorConfigError
from travel.data.curriculum import ScalableCurriculum
from travel.run import Run

ALGORITHMS = ("magrpo", "madpo", "madpo_iter", "marlhf", "marlhf_iter")



@pytest.fixture(scope="module")
def split():
    return ScalableCurriculum().split(validation_layout_rows())


def budget(split, algorithm, *overrides):
    cfg = compose_config(f"algorithm={algorithm}", *overrides)
    config = algorithm_config(cfg.algorithm)
    return spec_for(config).budget(config, split, cfg.curriculum.short_epochs)


def test_magrpo_keeps_its_curriculum_schedule_and_collects_nothing(split):
    b = budget(split, "magrpo")
    assert (b.collected_candidates, b.env_steps, b.optimizer_updates_per_agent) == (0, 5040, 126)
    assert not b.env_steps_is_upper_bound and len(b.eval_env_steps) == 26


def test_madpo_collects_once_and_counts_pairs_as_an_upper_bound(split):
    b = budget(split, "madpo")
    assert b.collected_candidates == 60 * 20 == 1200
    assert b.env_steps == 7 * 60 * 6 * 2 == 5040 and b.env_steps_unit == "pair_counted"
    assert b.env_steps_is_upper_bound and b.optimizer_updates_is_upper_bound
    assert b.optimizer_updates_per_agent == 7 * (360 // 10)
    assert b.eval_env_steps is None  # they depend on how many pairs the ties leave


def test_marlhf_online_budget_is_exact(split):
    b = budget(split, "marlhf")
    assert b.collected_candidates == 1200
    assert b.env_steps == 21 * 60 * 4 == 5040 and b.env_steps_unit == "online_joint_actions"
    assert not b.env_steps_is_upper_bound
    assert b.optimizer_updates_per_agent == 21 * 6
    assert b.eval_env_steps == [*range(0, 5040, 240), 5040]
    assert b.reward_model_updates_upper_bound == 360


def test_iterative_methods_collect_14400_candidates_over_six_refreshes(split):
    madpo, marlhf = budget(split, "madpo_iter"), budget(split, "marlhf_iter")
    assert madpo.collected_candidates == marlhf.collected_candidates == 6 * 60 * (20 + 20) == 14_400
    assert madpo.env_steps == 6 * 60 * 6 * 2 == 4320 and madpo.env_steps_is_upper_bound
    assert madpo.optimizer_updates_per_agent == 6 * 36
    assert marlhf.env_steps == 6 * 3 * 60 * 4 == 4320 and not marlhf.env_steps_is_upper_bound
    assert marlhf.optimizer_updates_per_agent == 18 * 6
    assert marlhf.eval_env_steps == [*range(0, 4320, 240), 4320]
    assert marlhf.reward_model_updates_upper_bound == 6 * 360


def test_budgets_follow_the_options(split):
    b = budget(
        split,
        "madpo_iter",
        "algorithm.num_iterations=2",
        "algorithm.comparator_num_candidates=3",
        "algorithm.preference_pairs_per_sample=5",
    )
    # index-wise comparison: at most min(20 targets, 3 comparators) = 3 pairs per row
    assert b.collected_candidates == 2 * 60 * 23
    assert b.preference_pairs_upper_bound == 2 * 60 * 3 and b.env_steps == 2 * 60 * 3 * 2
    small = budget(split, "madpo", "algorithm.preference_num_candidates=3")
    assert small.preference_pairs_upper_bound == 60 * 3  # 3 candidates give at most 3 ordered pairs
    sized = budget(split, "marlhf_iter", "algorithm.preference_replay_sample_size=50")
    assert sized.reward_model_updates_upper_bound == 6 * 50


@pytest.mark.parametrize(
    "algorithm, override, option",
    [
        ("madpo", "algorithm.pair_selection=comparator_reward", "algorithm.pair_selection=comparator_reward"),
        ("madpo", "algorithm.train_batch_size=0", "algorithm.train_batch_size=0"),
        ("marlhf", "algorithm.use_short_phase=true", "algorithm.use_short_phase=true"),
        ("madpo_iter", "algorithm.preference_generation_batch_size=0", "algorithm.preference_generation_batch_size=0"),
    ],
)
def test_options_that_cannot_work_are_named(split, algorithm, override, option):
    with pytest.raises(AlgorithmConfigError, match=option.replace(".", r"\.")):
        budget(split, algorithm, override)


def dry_run(tmp_path, *overrides):
    cfg = compose_config("mode=dry", "data=synthetic", *overrides)
    out = io.StringIO()
    with redirect_stdout(out):
        Run(cfg, run_dir=str(tmp_path))()
    return json.loads((tmp_path / "dry_run.json").read_text()), out.getvalue()


def test_dry_run_reports_every_algorithms_budget(tmp_path):
    expected = {
        "magrpo": (0, 5040, 126),
        "madpo": (1200, 5040, 252),
        "madpo_iter": (14_400, 4320, 216),
        "marlhf": (1200, 5040, 126),
        "marlhf_iter": (14_400, 4320, 108),
    }
    for algorithm in ALGORITHMS:
        report, printed = dry_run(tmp_path / algorithm, f"algorithm={algorithm}")
        got = (report["collected_candidates"], report["env_steps"], report["optimizer_updates_per_agent"])
        assert got == expected[algorithm], algorithm
        line = next(text for text in printed.splitlines() if "budget" in text)
        assert f"{algorithm}: {expected[algorithm][0]:,} collected candidates" in line
        assert f"{expected[algorithm][1]} env steps" in line and f"{expected[algorithm][2]} optimizer updates" in line
        assert ("at most" in line) == algorithm.startswith("madpo")
    assert report["comparator"] == "current_copy"  # the iterative default
    report, printed = dry_run(
        tmp_path / "central", "algorithm=marlhf_iter", "comparator=history1", "generation_mode=centralized"
    )
    assert (report["comparator"], report["generation_mode"]) == ("history1", "centralized")
    assert "comparator  history1 (centralized)" in printed


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["algorithm=madpo_iter", "comparator=none"], ["algorithm=madpo_iter", "comparator=none"]),
        (["algorithm=marlhf_iter", "comparator=none"], ["algorithm=marlhf_iter", "comparator=none"]),
        (["algorithm=madpo", "comparator=history1"], ["comparator=history1", "algorithm=madpo"]),
        (["algorithm=marlhf", "comparator=history1"], ["comparator=history1", "algorithm=marlhf"]),
        (["algorithm=madpo_iter", "comparator=model"], ["comparator.comparator_model_name"]),
        (["algorithm=madpo", "generation_mode=centralized"], ["generation_mode=centralized", "comparator=none"]),
    ],
)
def test_invalid_combinations_fail_the_dry_run_naming_the_options(tmp_path, overrides, named):
    with pytest.raises(ComparatorConfigError) as failure:
        dry_run(tmp_path, *overrides)
    for text in named:
        assert text in str(failure.value)
    assert not (tmp_path / "dry_run.json").exists()
