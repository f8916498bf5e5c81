"""Policy layouts: two role actors, or one joint actor whose actions split into the two role actions."""

from __future__ import annotations

import pytest

from tests.fixtures import fixture_row
from travel.agents.layouts import build_layout
from travel.agents.layouts import CentralizedLayout, DecentralizedLayout, layout_class
from travel.agents.models import build_tiny_random
from travel.algorithms.core.rollout import JointRolloutSampler
from travel.task.fields import JOINT_ACTION
from travel.task.joint_action import CENTRALIZED_JOINT, DECENTRALIZED, split_joint_action
from travel.task.joint_prompt import build_joint_prompt
from travel.task.prompts import build_role_prompt

HARDWARE = {"agent_devices": ["cpu", "cpu"], "parallel_training": "none"}
GENERATION = {"max_new_tokens": 320, "max_value_tokens": 6, "temperature": 0.7, "top_p": 0.8}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_centralized_layout_has_one_joint_actor_with_the_pooled_budget():
    calls = []

    def factory(**kwargs):
        calls.append(kwargs)
        return build_tiny_random(seed=0)

    layout = build_layout(factory, HARDWARE, GENERATION, learning_rate=2e-5, seed=0, layout="centralized")
    assert isinstance(layout, CentralizedLayout) and layout.kind == CENTRALIZED_JOINT
    assert len(calls) == 1 and len(layout.actors) == 1  # one model, tokenizer and optimizer
    (actor,) = layout.actors
    assert actor.joint and actor.agent_id == 0 and actor.decoder.max_new_tokens == 640
    assert layout_class("centralized").output_budget(1024) == 2048  # the default: 1,024 + 1,024
    row = fixture_row()
    assert actor.request(row).agent_id == JOINT_ACTION
    (prompt,) = layout.prompts(row)
    assert build_joint_prompt(row).user in prompt
    with pytest.raises(ValueError, match="actor.layout='joint'"):
        layout_class("joint")


def test_joint_rollouts_split_into_role_actions_and_count_one_env_step_per_joint_action(tmp_path):
    layout = build_layout(build_tiny_random, HARDWARE, GENERATION, learning_rate=2e-5, seed=0, layout="centralized")
    sampler = JointRolloutSampler(layout)
    row = fixture_row()
    (rollout,) = sampler.rollouts([row], 3)
    assert sampler.env_step == 3 and len(rollout.agents) == 1
    texts = rollout.agents[0].texts
    assert list(rollout.actions) == [split_joint_action(text) for text in texts]
    for text, candidate in zip(texts, rollout.agents[0].candidates):
        assert len(candidate.token_ids) <= 640  # never above the joint budget
        assert split_joint_action(text) != ("", "")  # the forced joint skeleton always splits
        assert candidate.value_mask.any() and not candidate.value_mask.all()
    layout.save(tmp_path / "actors")
    assert (tmp_path / "actors" / "joint" / "config.json").is_file()


def test_the_decentralized_layout_keeps_two_role_actors_and_their_texts():
    layout = build_layout(build_tiny_random, HARDWARE, GENERATION, learning_rate=2e-5, seed=0)
    assert isinstance(layout, DecentralizedLayout) and layout.kind == DECENTRALIZED
    assert [actor.agent_id for actor in layout.actors] == [0, 1] and not any(a.joint for a in layout.actors)
    row = fixture_row()
    assert [build_role_prompt(row, a).user in p for a, p in enumerate(layout.prompts(row))] == [True, True]
    assert layout.role_actions(["a", "b"]) == ("a", "b")
    with pytest.raises(ValueError, match="decentralized layout has 2 policies, got 1"):
        DecentralizedLayout(layout.actors[:1])
    with pytest.raises(ValueError, match="centralized layout has 1 policy, got 2"):
        CentralizedLayout(layout.actors)


def test_the_default_joint_budget_is_2048_in_the_dry_run(tmp_path):
    from tests.conftest import compose_config
    from travel.logging.dry_report import build_dry_report
    from travel.run import Run

    report = build_dry_report(Run(compose_config("mode=dry", "data=synthetic", "actor=centralized"), run_dir=str(tmp_path)))
    assert report["actor"] == {"layout": "centralized", "trainable_policies": 1, "joint_action": True, "output_tokens_per_action": 2048}
    joint, logistics = report["prompt_chars"]["joint"], report["prompt_chars"]["logistics"]
    assert joint["per_row"].keys() == logistics["per_row"].keys() and joint["min"] > logistics["min"]
    roles = build_dry_report(Run(compose_config("mode=dry", "data=synthetic"), run_dir=str(tmp_path / "roles")))
    assert roles["actor"]["output_tokens_per_action"] == 1024 and "joint" not in roles["prompt_chars"]
