"""Actors sample several rows in one decoder call, with the same greedy actions as row by row."""

from __future__ import annotations

import torch

from tests.fixtures import five_day_fixture_row, fixture_row
from travel.agents.layouts import build_layout
from travel.agents.models import build_tiny_random
from travel.task.actions import parse_assignments
from travel.task.roles import role_capacity


def test_sample_rows_equals_row_by_row_sampling():
    hardware = {"agent_devices": ["cpu", "cpu"], "parallel_training": "none"}
    generation = {"max_new_tokens": 400, "max_value_tokens": 2, "temperature": 0.7, "top_p": 0.8}
    actors = build_layout(build_tiny_random, hardware, generation, learning_rate=2e-5, seed=0)
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


def test_bf16_compute_decodes_and_updates_over_fp32_master_weights():
    """hardware.compute_dtype=bfloat16: actions stay strict, the update runs its forward in bf16, and the
    weights and AdamW state stay float32 (so steps of about the learning rate are not rounded away)."""
    from travel.algorithms.online.magrpo import BufferSample, value_loss_step

    hardware = {"agent_devices": ["cpu", "cpu"], "parallel_training": "none", "compute_dtype": "bfloat16"}
    generation = {"max_new_tokens": 400, "max_value_tokens": 2, "temperature": 0.7, "top_p": 0.8}
    actors = build_layout(build_tiny_random, hardware, generation, learning_rate=1e-5, seed=0)
    row = fixture_row()
    actor = actors[1]
    candidates = actor.sample(row, 2)
    for candidate in candidates:
        assert parse_assignments(candidate.text, 1, role_capacity(1, row.days), row.days).parse_success
    before = {name: p.detach().clone() for name, p in actor.model.named_parameters()}
    dtypes = []
    hook = actor.model.lm_head.register_forward_hook(lambda module, inputs, output: dtypes.append(output.dtype))
    sample = BufferSample(actor.prompt_ids(row), tuple(candidates), (0.5, -0.5), 0.0, 2)
    actors.update_each(lambda a: value_loss_step(a, [sample]) if a.agent_id == 1 else 0.0)
    hook.remove()
    assert dtypes and set(dtypes) == {torch.bfloat16}
    changed = [name for name, p in actor.model.named_parameters() if not torch.equal(p, before[name])]
    assert changed and all(p.dtype == torch.float32 for p in actor.model.parameters())
    assert all(state["exp_avg"].dtype == torch.float32 for state in actor.optimizer.state.values())


def test_the_hardware_and_generation_decode_options_reach_every_actor_decoder():
    hardware = {"agent_devices": ["cpu", "cpu"], "parallel_training": "none", "compile_decode": True, "compile_prefill": True,
                "step_backend": "eager", "share_prompt_cache": "never", "prefix_attention": "joint_softmax"}
    generation = {"max_new_tokens": 400, "max_value_tokens": 2, "temperature": 0.7, "top_p": 0.8, "jump_forced": True}
    actors = build_layout(build_tiny_random, hardware, generation, learning_rate=2e-5, seed=0)
    settings = [(actor.decoder.compile_decode, actor.decoder.compile_prefill, actor.decoder.jump_forced) for actor in actors]
    assert settings == [(True, True, True)] * 2
    steps = [(a.decoder.step_backend, a.decoder.share_prompt_cache, a.decoder.prefix_attention) for a in actors]
    assert steps == [("eager", "never", "joint_softmax")] * 2
    plain = build_layout(
        build_tiny_random, {**hardware, "compile_decode": False, "compile_prefill": False}, generation, learning_rate=2e-5, seed=0
    )
    assert [(actor.decoder.compile_decode, actor.decoder.compile_prefill) for actor in plain] == [(False, False)] * 2
