"""The curriculum filter and the stratified, interleaved split (docs/curriculum.md "Filter",
"Cells and the split", "Eval panels and the fixed anchor", "Short phase")."""

import pytest

from travel.data.curriculum import CurriculumError, ScalableCurriculum
from travel.data.row import TravelRow

PANELS = [[19, 74, 29, 90], [5, 68, 20, 80], [14, 63, 39, 94], [4, 71, 22, 88], [9, 70, 33, 92]]


def validation_layout_rows(per_cell: int = 20) -> list[TravelRow]:
    """Rows shaped like the 180-row validation split: level-major, then days 3/5/7 with 1/2/3 cities."""
    rows = []
    for level in ("easy", "medium", "hard"):
        for days, cities in ((3, 1), (5, 2), (7, 3)):
            for _ in range(per_cell):
                index = len(rows)
                rows.append(
                    TravelRow(
                        source_index=index, id=f"row-{index}", query="q", org="A", dest="B", days=days,
                        dates=("2022-01-01",) * days, date_text="", visiting_city_number=cities, people_number=1,
                        budget=1000.0, level=level, local_constraint={}, reference_information="x" * (1000 + index),
                        reference_records=(),
                    )
                )
    return rows


def test_default_split_reproduces_the_published_panels():
    split = ScalableCurriculum().split(validation_layout_rows())
    assert len(split.candidates) == 80
    assert len(split.train) == 60 and len(split.eval) == 20
    assert [[r.source_index for r in panel] for panel in split.panels] == PANELS
    assert [r.source_index for r in split.anchor] == PANELS[0]
    assert len(split.short) == 30 and all(r.days == 3 for r in split.short)


def test_split_is_disjoint_stratified_and_deterministic():
    rows = validation_layout_rows()
    first, second = ScalableCurriculum().split(rows), ScalableCurriculum().split(rows)
    assert [r.source_index for r in first.train] == [r.source_index for r in second.train]
    train, evals = {r.source_index for r in first.train}, {r.source_index for r in first.eval}
    assert not train & evals
    for panel in first.panels:
        assert [(r.days, r.level) for r in panel] == [(3, "easy"), (3, "medium"), (5, "easy"), (5, "medium")]
    cells = {}
    for row in first.train:
        cells[(row.days, row.level)] = cells.get((row.days, row.level), 0) + 1
    assert cells == {(3, "easy"): 15, (3, "medium"): 15, (5, "easy"): 15, (5, "medium"): 15}


def test_other_seed_gives_other_split():
    rows = validation_layout_rows()
    assert ScalableCurriculum(seed=7).split(rows).eval != ScalableCurriculum().split(rows).eval


def test_filter_keeps_source_order_and_select_shortest_is_a_no_op_at_the_pool_size():
    rows = validation_layout_rows()
    kept = ScalableCurriculum().filter(rows)
    assert [r.source_index for r in kept] == [*range(0, 20), *range(20, 40), *range(60, 80), *range(80, 100)]
    shortest = ScalableCurriculum(select_shortest=5).filter(rows)
    assert [r.source_index for r in shortest] == [0, 1, 2, 3, 4]


def test_small_per_cell_sizes_serve_a_small_file():
    split = ScalableCurriculum(train_per_cell=4, eval_per_cell=1).split(validation_layout_rows(per_cell=5))
    assert (len(split.train), len(split.eval), len(split.short), len(split.panels)) == (16, 4, 8, 1)


def test_eval_count_larger_than_the_pool_names_the_option():
    message = r"curriculum\.eval_per_cell=30.*has only 20 candidate rows; lower those two \(experiment=travelplanner_train_rows"
    with pytest.raises(CurriculumError, match=message):
        ScalableCurriculum(eval_per_cell=30).split(validation_layout_rows())


def test_filters_that_keep_nothing_fail_clearly():
    with pytest.raises(CurriculumError, match="keep no rows"):
        ScalableCurriculum(days=[4]).split(validation_layout_rows())


def test_unknown_stratify_field_names_the_option():
    with pytest.raises(CurriculumError, match=r"curriculum\.stratify_by.*'colour'"):
        ScalableCurriculum(stratify_by=["days", "colour"])


def test_short_phase_without_short_rows_fails():
    with pytest.raises(CurriculumError, match=r"curriculum\.short_days=\[4\]"):
        ScalableCurriculum(short_days=[4]).split(validation_layout_rows())


def test_held_out_rows_are_every_row_not_trained_on_grouped_by_cell():
    rows = validation_layout_rows()
    split = ScalableCurriculum(held_out_eval=True).split(rows)
    inside, outside = split.held_out["in_curriculum"], split.held_out["out_of_curriculum"]
    trained = {r.source_index for r in split.train}
    # select_shortest=80 keeps 80 of the 80 in-cell rows; 60 train + 20 eval leave none in the cells
    assert inside == () and len(outside) == len(rows) - 80
    assert not trained & {r.source_index for r in outside}
    assert {(r.days, r.level) for r in outside} == {(7, "easy"), (7, "medium"), (3, "hard"), (5, "hard"), (7, "hard")}
    smaller = ScalableCurriculum(held_out_eval=True, train_per_cell=4, eval_per_cell=1).split(rows)
    assert len(smaller.held_out["in_curriculum"]) == 80 - 16 - 4
    assert all(r.days in (3, 5) and r.level in ("easy", "medium") for r in smaller.held_out["in_curriculum"])
    seen = [r.source_index for r in (*smaller.train, *smaller.eval, *smaller.held_out["in_curriculum"], *smaller.held_out["out_of_curriculum"])]
    assert sorted(seen) == list(range(len(rows)))  # every row exactly once
    assert ScalableCurriculum().split(rows).held_out == {}  # off by default
    with pytest.raises(CurriculumError, match="curriculum.held_out_eval"):
        ScalableCurriculum(held_out_eval="yes")
