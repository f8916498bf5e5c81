"""Actors sample several rows in one decoder call, with the same greedy actions as row by row."""

from __future__ import annotations

import torch

from tests.fixtures import five_day_fixture_row, fixture_row
from travel.agents.actors import build_actors
from travel.agents.models import build_tiny_random
from travel.task.actions import parse_assignments
from travel.task.roles import role_capacity


def test_sample_rows_equals_row_by_row_sampling():
    hardware = {"agent_devices": ["cpu", "cpu"], "parallel_training": "none"}
    generation = {"max_new_tokens": 400, "max_value_tokens": 2, "temperature": 0.7, "top_p": 0.8}
    actors = build_actors(build_tiny_random, hardware, generation, learning_rate=2e-5, seed=0)
    rows = [five_day_fixture_row(), fixture_row()]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for actor in actors:
            together = actor.sample_rows(rows, 2, greedy=True)
            assert len(together) == len(rows)
            for row, group in zip(rows, together):
                alone = actor.sample(row, 2, greedy=True)
                assert [c.text for c in group] == [c.text for c in alone]
                for candidate in group:
                    assert torch.equal(candidate.prompt_ids, torch.tensor(actor.prompt_ids(row)))
                    parsed = parse_assignments(candidate.text, actor.agent_id, role_capacity(actor.agent_id, row.days), row.days)
                    assert parsed.parse_success, parsed.error
    finally:
        torch.set_num_threads(threads)
