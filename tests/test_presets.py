"""Every experiment with its own hardware preset, and every preset with every algorithm, through the checks a
training run makes before it loads weights (`mode=dry`): the typed options, the preset's fit for the algorithm,
the budget and the memory plan. A preset that does not suit an algorithm is refused, naming one that does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests.conftest import CONF, compose_config, require_shared_data
from travel.logging.memory_plan import MemoryPlan
from travel.run import Run

EXPERIMENTS = sorted(path.stem for path in (CONF / "experiment").glob("*.yaml"))
PRESETS = sorted(path.stem for path in (CONF / "hardware").glob("*.yaml"))
ALGORITHMS = sorted(path.stem for path in (CONF / "algorithm").glob("*.yaml"))


def dry_run(tmp_path: Path, *overrides: str) -> dict:
    return Run(compose_config(*overrides, "mode=dry"), run_dir=str(tmp_path))()


def experiment_overrides(name: str, model_dir: Path) -> list[str]:
    """What a user adds to the experiment's documented command: the train file where it reads local rows, a
    model directory where its model takes one (read from the composed config, so an experiment that builds on
    another gets its needs)."""
    cfg = compose_config(f"experiment={name}")
    extra = []
    if OmegaConf.is_missing(cfg.data, "path"):
        extra.append(f"data.path={require_shared_data() / 'train.jsonl'}")
    if "path" in cfg.model and cfg.model.name == "smollm2_135m":
        extra.append(f"model.path={model_dir}")
    return extra


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_passes_a_dry_run_with_its_own_preset(experiment, tmp_path):
    report = dry_run(tmp_path / "run", f"experiment={experiment}", *experiment_overrides(experiment, tmp_path))
    assert (tmp_path / "run" / "dry_run.json").is_file() and report["env_steps"] > 0


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_preset_runs_the_algorithms_it_suits_and_names_a_preset_for_the_others(preset, algorithm, tmp_path):
    unsuited = OmegaConf.to_container(compose_config(f"hardware={preset}").hardware.unsuited)
    if algorithm not in unsuited:
        assert dry_run(tmp_path / "run", "data=synthetic", f"hardware={preset}", f"algorithm={algorithm}")["env_steps"] > 0
        return
    with pytest.raises(ValueError, match=f"algorithm={algorithm} does not suit hardware={preset}: use hardware=(\\w+)") as raised:
        dry_run(tmp_path / "refused", "data=synthetic", f"hardware={preset}", f"algorithm={algorithm}")
    instead = re.search(r"use hardware=(\w+)", str(raised.value)).group(1)
    assert instead in PRESETS and instead == unsuited[algorithm]
    assert dry_run(tmp_path / "run", "data=synthetic", f"hardware={instead}", f"algorithm={algorithm}")["env_steps"] > 0


def test_the_presets_are_short_deltas_of_the_base():
    for preset in PRESETS:
        if preset == "base":
            continue
        node = OmegaConf.load(CONF / "hardware" / f"{preset}.yaml")
        lines = (CONF / "hardware" / f"{preset}.yaml").read_text().splitlines()
        assert list(node.defaults) == ["base", "_self_"] and len(lines) <= 25, preset
    assert {"1x80gb", "1xb200", "2gpu", "2gpu_preference", "cpu"} <= set(PRESETS)


@pytest.mark.parametrize(
    "preset, algorithm, actors, others",
    [
        ("1x80gb", "madpo_iter", {"cuda:0": ["policy 0 weights", "policy 1 weights"]}, {}),
        ("2gpu", "magrpo", {"cuda:0": ["policy 0 weights"], "cuda:1": ["policy 1 weights"]}, {}),
        (
            "2gpu_preference", "marlhf_iter", {"cuda:0": ["policy 0 weights", "policy 1 weights"]},
            {"cuda:1": {"comparator collection": ["comparator copy 0", "comparator copy 1"], "reward-model fitting": ["reward model weights"]}},
        ),
        ("2gpu_preference", "madpo_iter", {"cuda:0": ["policy 0 weights", "policy 1 weights"]}, {"cuda:1": {"comparator collection": ["comparator copy 0", "comparator copy 1"]}}),
    ],
)
def test_each_layout_places_its_models_on_the_devices_its_preset_names(preset, algorithm, actors, others):
    """Where the plan puts each model is where the layout, the comparator and the reward model are built: the
    actors on hardware.agent_devices, comparator copies on hardware.comparator_devices (a current_copy on another
    device than its actor is a frozen copy), the reward model on hardware.reward_model_device."""
    run = Run(compose_config("data=synthetic", "model=random_qwen3_4b", f"hardware={preset}", f"algorithm={algorithm}"))
    plan = MemoryPlan(run)
    for device, names in actors.items():
        held = [name for name in plan.parts[(device, "evaluation")] if name.endswith("weights")]
        assert held == names, (device, held)
    for device, phases in others.items():
        assert set(phases) <= set(plan.devices[device]) and "evaluation" not in plan.devices[device]
        for phase, names in phases.items():
            assert [n for n in names if n in plan.parts[(device, phase)]] == names
            assert not any(name.startswith("policy") for name in plan.parts[(device, phase)])
    spec = run.comparator_spec
    if spec.active:
        assert [str(d) for d in spec.devices] == list(run.hardware.comparator_devices)
    if hasattr(run.algorithm, "reward_model_device"):
        assert run.algorithm.reward_model_device == run.hardware.reward_model_device
