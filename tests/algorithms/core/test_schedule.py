"""MAGRPO's curriculum schedule and the budgets the dry run reports (docs/curriculum.md "Short phase")."""

import pytest

from tests.data.test_curriculum import validation_layout_rows
from travel.algorithms.core.schedule import curriculum_schedule
from travel.data.curriculum import CurriculumError, ScalableCurriculum


def default_schedule(**overrides):
    settings = dict(num_train_epochs=25, num_generations=4, rollout_buffer_size=10, short_epochs=8)
    settings.update(overrides)
    return curriculum_schedule(ScalableCurriculum().split(validation_layout_rows()), **settings)


def test_default_budget_is_5040_env_steps_and_126_updates():
    schedule = default_schedule()
    # 8 epochs x 30 short rows x 4 + 17 epochs x 60 rows x 4
    assert schedule.env_steps_by_phase() == {"short": 8 * 30 * 4, "full": 17 * 60 * 4}
    assert schedule.env_steps == 5040
    assert schedule.optimizer_updates_per_agent == 8 * 3 + 17 * 6 == 126


def test_evaluations_at_every_epoch_start_and_at_the_end():
    steps = default_schedule().eval_env_steps()
    assert steps == [*range(0, 960, 120), *range(960, 5040, 240), 5040]
    assert len(steps) == 26


def test_partial_buffers_count_as_updates():
    schedule = default_schedule(rollout_buffer_size=7)
    assert schedule.optimizer_updates_per_agent == 8 * 5 + 17 * 9


def test_without_short_phase_every_epoch_uses_all_rows():
    schedule = default_schedule(use_short_phase=False, num_train_epochs=21)
    assert schedule.env_steps == 21 * 60 * 4 == 5040


@pytest.mark.parametrize(
    "overrides, option",
    [
        ({"num_generations": 1}, "algorithm.num_generations=1"),
        ({"short_epochs": 25}, "curriculum.short_epochs=25"),
        ({"rollout_buffer_size": 0}, "algorithm.rollout_buffer_size=0"),
    ],
)
def test_settings_that_cannot_work_name_the_option(overrides, option):
    with pytest.raises(CurriculumError, match=option.replace(".", r"\.")):
        default_schedule(**overrides)
