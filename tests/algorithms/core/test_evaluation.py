"""Evaluation: greedy anchor points, the terminal full-pool evaluation and eval_final.json."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from tests.fixtures import (
    all_dash_action_text,
    five_day_fixture_row,
    fixture_row,
    role_action_text,
    valid_plan_values,
)
from travel.algorithms.core.evaluation import EVAL_FINAL_FILE, EVALUATIONS_FILE, Evaluator
from travel.algorithms.core.rollout import JointRolloutSampler
from travel.logging.eval_aggregation import EVAL_METRIC_NAMES


@dataclass(frozen=True)
class Candidate:
    text: str
    token_ids: tuple[int, ...] = (1,)
    value_mask: tuple[int, ...] = (1,)


class RowScriptedPolicy:
    """Answers each row with a fixed action (valid plan or all dashes) and records greedy flags."""

    def __init__(self, agent_id: int, answers: dict[int, str]):
        self.agent_id, self.answers, self.greedy_flags = agent_id, answers, []

    def prompt_ids(self, row):
        return (self.agent_id,)

    def sample(self, row, num_candidates, *, greedy=False):
        self.greedy_flags.append(greedy)
        return [Candidate(self.answers[id(row)])] * num_candidates


class RecordingTracker:
    def __init__(self):
        self.records = []

    def log(self, metrics, *, env_step, upload=True):
        self.records.append((env_step, dict(metrics)))


@pytest.fixture(scope="module")
def pool():
    """Eval rows: anchor [valid 3-day, dash 3-day, valid 5-day, dash 5-day], then two more valid 3-day rows."""
    rows = [fixture_row(), fixture_row(), five_day_fixture_row(), five_day_fixture_row(), fixture_row(), fixture_row()]
    valid = [True, False, True, False, True, True]
    answers = ({}, {})
    for row, ok in zip(rows, valid):
        for agent in (0, 1):
            text = role_action_text(agent, valid_plan_values(row), row.days) if ok else all_dash_action_text(agent, row.days)
            answers[agent][id(row)] = text
    return rows, answers


def make_evaluator(pool, tracker=None, greedy=True):
    rows, answers = pool
    policies = [RowScriptedPolicy(0, answers[0]), RowScriptedPolicy(1, answers[1])]
    sampler = JointRolloutSampler(policies)
    evaluator = Evaluator(
        sampler, anchor_rows=rows[:4], eval_rows=rows, panel_size=4, tracker=tracker, greedy=greedy, progress=False
    )
    return evaluator, sampler, policies


def test_periodic_evaluation_scores_the_anchor_greedily_and_logs_the_17_names(pool):
    tracker = RecordingTracker()
    evaluator, sampler, policies = make_evaluator(pool, tracker)
    point = evaluator.periodic(120)
    # docs/reward.md "Reference values": a valid plan scores 1.00, a strict all-dash joint action exactly 0.08
    assert point.metrics["eval/reward"] == pytest.approx((1.0 + 0.08 + 1.0 + 0.08) / 4)
    assert point.metrics["eval/reference_plan_success"] == pytest.approx(0.5)
    assert point.metrics["eval/team_action_success"] == pytest.approx(1.0)  # all-dash actions are strict
    assert point.metrics["eval/required_grounded_recall"] == pytest.approx(0.5)  # each pair: all or none of a row
    assert set(point.metrics) == set(EVAL_METRIC_NAMES)
    assert tracker.records == [(120, point.metrics)]
    assert sampler.env_step == 0
    assert policies[0].greedy_flags == [True] * 4 and policies[1].greedy_flags == [True] * 4
    assert len(point.samples) == 4 and point.samples[0]["panel"] == 1


def test_terminal_evaluation_uses_the_first_panel_for_eval_and_writes_the_full_pool(pool, tmp_path):
    tracker = RecordingTracker()
    evaluator, _, _ = make_evaluator(pool, tracker)
    point = evaluator.terminal(4800, tmp_path)
    assert point.public["eval/reward"] == pytest.approx(0.54)
    assert point.full["eval_full/reward"] == pytest.approx((1.0 + 0.08 + 1.0 + 0.08 + 1.0 + 1.0) / 6)
    assert point.full["eval_full/reference_plan_success"] == pytest.approx(4 / 6)
    (env_step, logged), = tracker.records
    assert env_step == 4800 and set(logged) == set(EVAL_METRIC_NAMES)  # eval_full/* is never logged
    saved = json.loads((tmp_path / EVAL_FINAL_FILE).read_text())
    assert saved["env_step"] == 4800 and saved["num_rows"] == 6 and saved["anchor_rows"] == 4
    assert saved["eval"] == point.public and saved["eval_full"] == point.full
    assert [s["panel"] for s in saved["samples"]] == [1, 1, 1, 1, 2, 2]
    assert saved["samples"][1]["reward"] == pytest.approx(0.08)
    assert not list(tmp_path.glob("*.partial"))


def test_held_out_rows_are_scored_at_the_end_and_reported_apart_from_eval(pool, tmp_path):
    rows, answers = pool
    extra = {"in_curriculum": [fixture_row()], "out_of_curriculum": [five_day_fixture_row(), five_day_fixture_row()]}
    answers = tuple(dict(a) for a in answers)
    for row, ok in ((extra["in_curriculum"][0], True), (extra["out_of_curriculum"][0], False), (extra["out_of_curriculum"][1], True)):
        for agent in (0, 1):
            text = role_action_text(agent, valid_plan_values(row), row.days) if ok else all_dash_action_text(agent, row.days)
            answers[agent][id(row)] = text
    tracker = RecordingTracker()
    sampler = JointRolloutSampler([RowScriptedPolicy(0, answers[0]), RowScriptedPolicy(1, answers[1])])
    evaluator = Evaluator(sampler, anchor_rows=rows[:4], eval_rows=rows, panel_size=4, tracker=tracker, progress=False, held_out=extra)
    evaluator.periodic(0)
    assert evaluator.history[-1].held_out == {}  # periodic points never score held-out rows
    point = evaluator.terminal(40, tmp_path)
    # eval/* and eval_full/* are those of the anchor and the pool, as without held-out rows
    assert point.public["eval/reward"] == pytest.approx(0.54)
    assert point.full["eval_full/reward"] == pytest.approx((1.0 + 0.08 + 1.0 + 0.08 + 1.0 + 1.0) / 6)
    assert [set(logged) for _, logged in tracker.records] == [set(EVAL_METRIC_NAMES)] * 2
    inside, outside = point.held_out["in_curriculum"], point.held_out["out_of_curriculum"]
    assert inside["rows"] == 7  # the eval pool and the unused in-cell row
    assert inside["metrics"]["reward"] == pytest.approx((1.0 + 0.08 + 1.0 + 0.08 + 1.0 + 1.0 + 1.0) / 7)
    assert outside["rows"] == 2 and outside["metrics"]["reward"] == pytest.approx((0.08 + 1.0) / 2)
    assert outside["metrics"]["reference_plan_success"] == pytest.approx(0.5)
    assert set(outside["cells"]) == {"5-day easy 2 cities"} and outside["cells"]["5-day easy 2 cities"]["rows"] == 2
    assert set(inside["cells"]) == {"3-day easy 1 city", "5-day easy 2 cities"}
    saved = json.loads((tmp_path / EVAL_FINAL_FILE).read_text())
    assert saved["held_out"] == point.held_out and saved["eval"] == point.public
    assert [s["group"] for s in saved["held_out_samples"]] == ["in_curriculum", "out_of_curriculum", "out_of_curriculum"]
    history = json.loads((tmp_path / EVALUATIONS_FILE).read_text())["evaluations"]
    assert [(p["env_step"], bool(p["held_out"])) for p in history] == [(0, False), (40, True)]
    assert history[-1]["samples"][0]["texts"] == point.samples[0]["texts"]  # the actions the plan pages show
    evaluator.restore_history(history)
    assert evaluator.history[-1].held_out == point.held_out


def test_history_keeps_every_point_in_order(pool):
    evaluator, _, _ = make_evaluator(pool)
    evaluator.periodic(0)
    evaluator.periodic(8)
    evaluator.terminal(24)
    assert [(p.env_step, p.terminal) for p in evaluator.history] == [(0, False), (8, False), (24, True)]


def test_sampling_evaluation_when_greedy_is_off(pool):
    evaluator, _, policies = make_evaluator(pool, greedy=False)
    evaluator.periodic(0)
    assert policies[0].greedy_flags == [False] * 4


def test_an_empty_anchor_or_a_foreign_anchor_is_refused(pool):
    rows, answers = pool
    sampler = JointRolloutSampler([RowScriptedPolicy(0, answers[0]), RowScriptedPolicy(1, answers[1])])
    with pytest.raises(ValueError, match="curriculum.eval_per_cell"):
        Evaluator(sampler, anchor_rows=(), eval_rows=(), panel_size=4)
    with pytest.raises(ValueError, match="first panel"):
        Evaluator(sampler, anchor_rows=rows[1:5], eval_rows=rows, panel_size=4)


class PanelBatchingPolicy(RowScriptedPolicy):
    """Samples several rows per call; records the rows of each call."""

    def __init__(self, agent_id: int, answers: dict[int, str], rows):
        super().__init__(agent_id, answers)
        self.position = {id(row): index for index, row in enumerate(rows)}
        self.calls = []

    def sample_rows(self, rows, num_candidates, *, greedy=False):
        self.calls.append([self.position[id(row)] for row in rows])
        return [self.sample(row, num_candidates, greedy=greedy) for row in rows]


@pytest.mark.parametrize(
    "eval_rows_per_call, sampler_rows_per_call, calls",
    [
        (1, None, [[0], [1], [2], [3], [4], [5]]),  # the default: each row alone
        (4, None, [[0, 1, 2, 3], [4, 5]]),
        (4, 3, [[0, 1, 2], [3], [4, 5]]),  # the sampler's own cap splits further
    ],
)
def test_evaluation_decodes_eval_rows_per_call_rows_at_once(pool, eval_rows_per_call, sampler_rows_per_call, calls):
    rows, answers = pool
    policies = [PanelBatchingPolicy(agent, answers[agent], rows) for agent in (0, 1)]
    sampler = JointRolloutSampler(policies, rows_per_call=sampler_rows_per_call)
    evaluator = Evaluator(
        sampler, anchor_rows=rows[:4], eval_rows=rows, panel_size=4, progress=False, rows_per_call=eval_rows_per_call
    )
    point = evaluator.terminal(40)
    assert [policy.calls for policy in policies] == [calls, calls]
    assert [sample["panel"] for sample in point.samples] == [1, 1, 1, 1, 2, 2]
    assert point.metrics["eval/reward"] == pytest.approx((1.0 + 0.08 + 1.0 + 0.08) / 4)
    assert sampler.env_step == 0


def test_eval_rows_per_call_must_be_positive(pool):
    rows, answers = pool
    sampler = JointRolloutSampler([PanelBatchingPolicy(agent, answers[agent], rows) for agent in (0, 1)])
    with pytest.raises(ValueError, match="generation.eval_rows_per_call=0"):
        Evaluator(sampler, anchor_rows=rows[:4], eval_rows=rows, panel_size=4, rows_per_call=0)


@pytest.mark.parametrize("step_backend", ["eager", "static"])
def test_rows_decoded_together_get_the_same_greedy_actions_as_rows_decoded_alone(step_backend):
    """The default eval_rows_per_call (4) changes how many rows share a decoder call, never an action."""
    import torch

    from travel.agents.models import build_tiny_random
    from travel.data.normalise import normalise_row
    from travel.data.synthetic import SyntheticSource
    from travel.generation import StructuredDecoder
    from travel.agents.actors import Actor

    rows = [normalise_row(raw, index) for index, raw in enumerate(SyntheticSource(seed=0, num_rows=4).load_raw())]
    actors = []
    for agent_id in (0, 1):
        loaded = build_tiny_random(seed=agent_id)
        decoder = StructuredDecoder(loaded.model, loaded.tokenizer, max_new_tokens=200, step_backend=step_backend)
        optimizer = torch.optim.AdamW(loaded.model.parameters())
        actors.append(Actor(agent_id, loaded.model, loaded.tokenizer, optimizer, torch.device("cpu"), decoder))
    sampler = JointRolloutSampler(actors)
    texts = {}
    for rows_per_call in (1, 4):
        evaluator = Evaluator(sampler, anchor_rows=rows, eval_rows=rows, panel_size=4, progress=False, rows_per_call=rows_per_call)
        texts[rows_per_call] = [sample["texts"] for sample in evaluator.periodic(0).samples]
    assert texts[1] == texts[4]
    assert len({tuple(t) for t in texts[1]}) > 1  # the rows get different actions, so a mix-up would show
