"""Every option of every config group composes, and what can be built without weights instantiates."""

from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException, InstantiationException, MissingConfigException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from tests.conftest import compose_config
from travel.run import Run

CONF = Path(__file__).resolve().parents[1] / "conf"
GROUPS = sorted(p.name for p in CONF.iterdir() if p.is_dir() and p.name != "hydra")
LAUNCHERS = ["basic", *sorted(p.stem for p in (CONF / "hydra" / "launcher").glob("*.yaml"))]


def options():
    for group in GROUPS:
        for path in sorted((CONF / group).glob("*.yaml")):
            yield group, path.stem


@pytest.mark.parametrize("group, option", list(options()))
def test_every_option_composes_and_instantiates(group, option, tmp_path):
    cfg = compose_config(f"{group}={option}")
    if OmegaConf.is_missing(cfg.data, "path"):  # local rows: a path only the user can give
        cfg = compose_config(f"{group}={option}", "data.path=rows.jsonl")
    source = instantiate(cfg.data)
    assert hasattr(source, "load_raw")
    curriculum = instantiate(cfg.curriculum)
    assert curriculum.train_per_cell >= 0
    assert cfg.algorithm.get("num_generations", 2) >= 2 and cfg.algorithm.name
    assert len(cfg.hardware.agent_devices) == 2
    assert instantiate(cfg.reward).reward_range == (-0.25, 1.0)
    tracker = instantiate(cfg.logger)(run_dir=tmp_path / "logs", **({"mode": "disabled"} if cfg.logger.mode else {}))
    tracker.close()
    run = Run(cfg, run_dir=str(tmp_path))
    assert run.cfg.mode.name in Run.MODES
    run.save_config()
    assert (tmp_path / "config.yaml").is_file()


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_every_launcher_composes_with_hardware_resources(launcher):
    cfg = compose_config(f"hydra/launcher={launcher}", "hardware=2gpu", hydra=True)
    if launcher != "basic":
        assert cfg.hydra.launcher.gpus_per_node == 2
        assert cfg.hydra.launcher.mem_gb == cfg.hardware.slurm.mem_gb
    assert cfg.hydra.sweep.dir.startswith("multirun_outputs/")


def test_launcher_resources_follow_overrides_and_dry_mode():
    cfg = compose_config("hydra/launcher=submitit_slurm", "hardware.slurm.partition=gpu", "hardware.slurm.timeout_min=7", hydra=True)
    assert (cfg.hydra.launcher.partition, cfg.hydra.launcher.timeout_min) == ("gpu", 7)
    dry = compose_config("hydra/launcher=submitit_slurm", "mode=dry", hydra=True)
    assert dry.hydra.launcher.gpus_per_node == 0


def test_single_runs_land_under_outputs_algorithm_seed():
    cfg = compose_config("seed=3", hydra=True)
    assert cfg.hydra.run.dir.startswith("outputs/magrpo/3_")


def test_unknown_curriculum_option_is_named():
    with pytest.raises(ConfigCompositionException, match="curriculum.warmup"):
        compose_config("curriculum.warmup=3")
    cfg = compose_config("+curriculum.warmup=3")
    with pytest.raises(InstantiationException, match="warmup"):
        instantiate(cfg.curriculum)


def test_unknown_group_option_lists_the_choices():
    with pytest.raises(MissingConfigException, match="scalable"):
        compose_config("curriculum=steep")


@pytest.mark.parametrize("group, wrong", [("experiment", "smokee"), ("model", "qwen3"), ("hardware", "h100")])
def test_a_misspelled_experiment_model_or_preset_is_an_error_listing_the_choices(group, wrong):
    """No group is optional in the defaults list: a name that is not there never falls back to the default run."""
    with pytest.raises(MissingConfigException) as raised:
        compose_config(f"{group}={wrong}")
    choices = sorted(path.stem for path in (CONF / group).glob("*.yaml"))
    assert f"Could not find '{group}/{wrong}'" in str(raised.value)
    assert all(choice in str(raised.value) for choice in choices) and len(choices) >= 4


def test_local_data_without_a_path_fails_naming_the_option():
    cfg = compose_config("data=local")
    with pytest.raises(Exception, match="data.path"):
        instantiate(cfg.data)
