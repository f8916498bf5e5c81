"""The run's report: the initial / final / delta table, summary.md and the curve figure."""

import matplotlib
import pytest

from travel.logging.report import MAIN_TABLE_METRICS, fit_y_axis, format_table, plot_eval_curve, write_summary

matplotlib.use("Agg")


def point(reward, rate=0.0):
    return {"eval/reward": reward, **{f"eval/{name}": rate for name in MAIN_TABLE_METRICS if name != "reward"},
            "eval/action_validity": 1.0}


def test_a_small_reward_change_gets_an_axis_fitted_to_it():
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots()
    fit_y_axis(axis, [0.4235, 0.4299])
    low, high = axis.get_ylim()
    assert high - low == pytest.approx(1.2 * 0.02) and low < 0.4235 and high > 0.4299  # not -0.25..1
    plt.close(figure)


def test_the_figure_has_a_training_panel_when_train_records_are_given(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    panels = []
    real = plt.subplots
    monkeypatch.setattr(plt, "subplots", lambda rows, *a, **k: panels.append(rows) or real(rows, *a, **k))
    points = [(0, point(0.08)), (8, point(0.081))]
    train = [{"env_step": 6, "train/reward": 0.07, "train/reward_group_std": 0.01, "train/loss_agent_0": 1e-5}]
    for records in ((), train):
        path = plot_eval_curve(points, tmp_path / f"curve_{len(records)}.png", "t", records)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert panels == [2, 3]


def test_summary_holds_the_table(tmp_path):
    table = format_table(point(0.1), point(0.2), initial_step=0, final_step=16)
    text = write_summary(tmp_path, "magrpo seed 42", table).read_text()
    assert text.startswith("# magrpo seed 42") and "+0.1000" in text and "final = env step 16" in text
