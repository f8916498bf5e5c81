"""W&B names, groups and tags of runs (travel/logging/run_name.py), composed from real configs."""

import pytest

from tests.conftest import compose_config
from travel.logging.run_name import model_label, slurm_job_label
from travel.run import Run


def identity(*overrides, tmp_path):
    return Run(compose_config("data=synthetic", *overrides), run_dir=str(tmp_path)).wandb_identity()


@pytest.fixture(autouse=True)
def slurm_job(monkeypatch):
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")


@pytest.mark.parametrize(
    "overrides, name",
    [
        ((), "Travel-magrpo-qwen3-4b-hard-budget-60train"),
        (("actor=centralized",), "Travel-magrpo-cenactor-qwen3-4b-hard-budget-60train"),
        (("algorithm=marlhf_iter",), "travel-marlhf-iter-currentcmp-seed42-4242"),
        (("algorithm=marlhf_iter", "generation_mode=centralized"), "travel-marlhf-iter-central-currentcmp-seed42-4242"),
        (("algorithm=marlhf_iter", "actor=centralized"), "travel-marlhf-iter-cenactor-central-currentcmp-seed42-4242"),
        (("algorithm=madpo_iter", "comparator=history1", "seed=7"), "travel-madpo-iter-history1cmp-seed7-4242"),
        (
            ("algorithm=madpo_iter", "comparator=model", "comparator.comparator_model_name=Qwen/Qwen3-1.7B"),
            "travel-madpo-iter-qwen3-1.7bcmp-seed42-4242",
        ),
        (("algorithm=madpo",), "travel-madpo-seed42-4242"),
        (("algorithm=marlhf", "actor=centralized"), "travel-marlhf-cenactor-seed42-4242"),
    ],
)
def test_run_names(overrides, name, tmp_path):
    assert identity(*overrides, tmp_path=tmp_path)["name"] == name


def test_a_seed_sweep_shares_one_group_and_the_replay_setting_is_in_group_and_tags(tmp_path):
    groups = {identity("algorithm=madpo_iter", f"seed={seed}", tmp_path=tmp_path)["group"] for seed in (1, 2, 3)}
    assert groups == {"travel-madpo-iter-currentcmp-replay-lambda_decay0.8"}
    other = identity("algorithm=madpo_iter", "algorithm.preference_replay_lambda=0.5", tmp_path=tmp_path)
    assert other["group"] == "travel-madpo-iter-currentcmp-replay-lambda_decay0.5"
    assert "replay-lambda_decay0.5" in other["tags"]
    magrpo = identity(tmp_path=tmp_path)
    assert magrpo["group"] == magrpo["name"] and "magrpo" in magrpo["tags"]


def test_logger_name_and_group_win(tmp_path):
    chosen = identity("logger=wandb", "logger.name=mine", "logger.group=ours", tmp_path=tmp_path)
    assert (chosen["name"], chosen["group"]) == ("mine", "ours")
    assert {"travelplanner", "single-turn", "decentralized-actor"} <= set(chosen["tags"])


def test_job_label_and_model_label():
    assert slurm_job_label({}) == "local"
    assert slurm_job_label({"SLURM_JOB_ID": "77"}) == "77"
    assert slurm_job_label({"SLURM_JOB_ID": "78", "SLURM_ARRAY_JOB_ID": "70", "SLURM_ARRAY_TASK_ID": "3"}) == "70_3"
    assert model_label("qwen3_4b_instruct") == "qwen3-4b"
    assert model_label("/models/SmolLM2-135M-Instruct/") == "smollm2-135m"
