"""Controlled learning: an algorithm, run end to end by the Run that launch.py builds (decoder, sampling,
reward seam, buffers, schedule, preference collection and the optimizer), raises the greedy
evaluation score of a task with a known optimum (tests/algorithms/learning_task.py) from its initial value
to that optimum.

The tiny random model and a large learning rate keep each run under a minute on two CPU cores. The
evaluation score takes the values 0, 0.5 and 1 (one eval row, two target slots), so "near the optimum"
means the terminal point is the optimum and the last two points average at least 0.75.
"""

from __future__ import annotations

import json
import statistics

import pytest

from tests.algorithms.learning_task import OPTIMUM, target_score, write_rows
from tests.conftest import compose_config
from travel.run import Run

pytestmark = pytest.mark.end_to_end  # whole training runs: this file starts first

# Shared by every algorithm: the fixture rows (2 train, 1 eval), catalog values, one CPU thread (the suite runs two workers).
TASK = [
    "experiment=smoke",
    "data=local",
    "curriculum.days=[3]",
    "curriculum.levels=[easy]",
    "curriculum.train_per_cell=2",
    "curriculum.eval_per_cell=1",
    "curriculum.eval_panel_size=1",
    "generation.values=catalog",
    "generation.max_new_tokens=400",
    "hardware.torch_threads=1",
    "output.save_final_model=false",
]
PREFERENCES = [
    "algorithm.preference_num_candidates=8",
    "algorithm.preference_generation_batch_size=8",
    "algorithm.preference_pairs_per_sample=3",
]
MORE_PAIRS = [
    "algorithm.preference_num_candidates=12",
    "algorithm.preference_generation_batch_size=12",
    "algorithm.preference_pairs_per_sample=6",
]
DPO = ["algorithm.learning_rate=3e-3", "algorithm.dpo_beta=1.0", "algorithm.train_batch_size=2", "algorithm.eval_every_updates=3"]
ONLINE = ["algorithm.learning_rate=1e-3", "algorithm.num_generations=4", "algorithm.eval_every_epochs=2"]
# The reward model reads ~9k-token joint texts in which a few action tokens differ: fine-tuning the random
# backbone on a dozen pairs does not generalise, a linear head over its frozen features does.
REWARD_MODEL = [
    "algorithm.reward_freeze_backbone=true",
    "algorithm.reward_learning_rate=1e-2",
    "algorithm.reward_num_train_epochs=8",
]
LEARNING_RUNS = {
    "magrpo": [*ONLINE, "algorithm.num_train_epochs=6"],
    "marlhf": [*MORE_PAIRS, *REWARD_MODEL, *ONLINE, "algorithm.eval_every_epochs=1", "algorithm.num_train_epochs=3"],
    # one online epoch per iteration, at twice the step (3e-3 stops at 0.5)
    "marlhf_iter": [
        *MORE_PAIRS,
        *REWARD_MODEL,
        *ONLINE,
        "algorithm.learning_rate=2e-3",
        "algorithm.eval_every_epochs=1",
        "algorithm.num_iterations=2",
        "algorithm.num_train_epochs=1",
    ],
    "madpo": [*PREFERENCES, *DPO, "algorithm.num_train_epochs=2"],
    # each refresh needs enough new pairs against the current-copy comparator, so more candidates and pairs
    "madpo_iter": [
        *DPO,
        *MORE_PAIRS,
        "algorithm.num_iterations=2",
        "algorithm.num_train_epochs=1",
    ],
}


def learning_curve(tmp_path, algorithm: str, *extra: str) -> list[tuple[int, float]]:
    """(env_step, eval/reward) of every evaluation of a controlled run, the terminal one last."""
    rows = write_rows(tmp_path / "rows.jsonl")
    overrides = [*TASK, f"data.path={rows}", f"algorithm={algorithm}", *LEARNING_RUNS[algorithm], *extra]
    run_dir = tmp_path / "run"
    Run(compose_config(*overrides), run_dir=str(run_dir), score=target_score)()
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [(r["env_step"], r["eval/reward"]) for r in records if "eval/reward" in r]


# The joint actor (actor=centralized) writes both target slots in one action. One fixed collection of a
# joint policy needs more pairs, and a smaller step, than two role policies do: each joint pair trains one
# sequence of both roles (at 3e-3 its greedy score oscillates between 0.5 and 1).
CASES = [
    *((algorithm, ()) for algorithm in LEARNING_RUNS),
    ("magrpo", ("actor=centralized", "algorithm.num_train_epochs=8")),  # its score reaches 1 after 6 epochs
    ("madpo", ("actor=centralized", *MORE_PAIRS, "algorithm.learning_rate=1.5e-3")),
    # the updates through compiled, checkpointed decoder layers (what hardware=1xb200 runs)
    ("magrpo", ("hardware.compile_update=true", "hardware.gradient_checkpointing=true")),
]
CASE_IDS = [algorithm + ("-centralized" if "actor=centralized" in extra else "-compiled" if extra else "") for algorithm, extra in CASES]


@pytest.mark.parametrize("algorithm, layout", CASES, ids=CASE_IDS)
def test_the_greedy_score_learns_up_to_the_known_optimum(tmp_path, algorithm, layout):
    curve = learning_curve(tmp_path, algorithm, *layout)
    scores = [score for _, score in curve]
    assert scores[0] <= OPTIMUM / 2, curve  # the initial policy is far from the optimum
    assert scores[-1] == pytest.approx(OPTIMUM), curve
    assert statistics.fmean(scores[-2:]) >= 0.75 * OPTIMUM, curve
