"""mode=eval rebuilds a saved run from its own config.yaml, and builds only the project's `_target_`s from it: a
run directory someone shared cannot make the evaluation run their code."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from tests.conftest import compose_config
from travel.run import Run


def shared_run(tmp_path, **replaced: str):
    """A finished run's directory (config.yaml, eval_final.json, actors/) with `replaced` {dotted key: value}."""
    run_dir = tmp_path / "shared_run"
    (run_dir / "actors" / "agent_0").mkdir(parents=True)
    cfg = compose_config("experiment=smoke")
    for key, value in replaced.items():
        OmegaConf.update(cfg, key, value)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    (run_dir / "eval_final.json").write_text(json.dumps({"env_step": 16}))
    return run_dir


@pytest.mark.parametrize(
    "key, target",
    [("model._target_", "shutil.copyfile"), ("reward._target_", "os.system"), ("data._target_", "travelling.Source")],
)
def test_a_saved_config_naming_foreign_code_is_refused_naming_the_key(tmp_path, key, target):
    run_dir = shared_run(tmp_path, **{key: target})
    with pytest.raises(ValueError, match=rf"config.yaml: {key}='{target}' is not the project's own \(travel\.\*\): refused"):
        Run(compose_config("mode=eval", f"checkpoint={run_dir}"), run_dir=str(tmp_path / "eval"))()
    assert not (tmp_path / "eval" / "eval_final.json").exists()


def test_the_project_targets_of_a_saved_config_pass_the_check(tmp_path):
    from travel.checkpoint.evaluate_saved import check_own_targets

    run_dir = shared_run(tmp_path)
    check_own_targets(OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml")), run_dir / "config.yaml")
