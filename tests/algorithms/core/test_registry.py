"""The algorithm registry: a new algorithm is one module and one YAML, and the run, the dry report, the
budgets and the smoke experiment find it through the registry alone."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO_ROOT, compose_config
from travel.algorithms.core.config import AlgorithmConfigError
from travel.algorithms.core.registry import algorithm_config, registered, spec_for
from travel.run import Run

pytestmark = pytest.mark.end_to_end  # a whole smoke run of the toy algorithm: this file starts first

TOY_MODULE = '''
"""REINFORCE with a running baseline: MAGRPO's loop with its own advantage estimator, and no project file touched."""

from dataclasses import dataclass

from travel.algorithms.core.budgets import magrpo_budget
from travel.algorithms.core.config import AlgorithmConfig, OnlineOptions
from travel.algorithms.core.registry import AlgorithmSpec, register
from travel.algorithms.online.magrpo import build_magrpo


@dataclass(frozen=True)
class ReinforceConfig(OnlineOptions, AlgorithmConfig):
    name: str = "toy_reinforce"
    num_train_epochs: int = 3
    baseline_decay: float = 0.5


class RunningBaseline:
    """advantage = reward - b, b the running mean of the earlier groups' mean rewards (0 before the first)."""

    calls = []  # (rewards, advantages) of every group, read by the test

    def __init__(self, config):
        self.decay, self.baseline = config.baseline_decay, 0.0

    def __call__(self, rewards):
        advantages = [r - self.baseline for r in rewards]
        RunningBaseline.calls.append((list(rewards), advantages))
        self.baseline = self.decay * self.baseline + (1 - self.decay) * sum(rewards) / len(rewards)
        return advantages

    def state_dict(self):
        return {"baseline": self.baseline}

    def load_state_dict(self, state):
        self.baseline = state["baseline"]


register(
    AlgorithmSpec(
        "toy_reinforce", ReinforceConfig, budget=magrpo_budget, build_trainer=build_magrpo, advantage=RunningBaseline,
        checkpoints=True,
    )
)
'''

# num_generations and logging_steps differ from the smoke preset's (2 and 4), so the test sees the preset apply
TOY_YAML = """\
_target_: toy_reinforce.ReinforceConfig
name: toy_reinforce
num_train_epochs: 3
num_generations: 4
rollout_buffer_size: 4
use_short_phase: false
eval_every_epochs: 1
learning_rate: 1.0e-4
advantage_mode: mean
advantage_normalization: false
logging_steps: 20
baseline_decay: 0.5
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy algorithm's module on sys.path and its YAML in a config directory on Hydra's search path."""
    (tmp_path / "toy_reinforce.py").write_text(textwrap.dedent(TOY_MODULE))
    (tmp_path / "conf" / "algorithm").mkdir(parents=True)
    (tmp_path / "conf" / "algorithm" / "toy_reinforce.yaml").write_text(TOY_YAML)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def toy_overrides(toy):
    return ["algorithm=toy_reinforce", f"hydra.searchpath=[file://{toy / 'conf'}]"]


def test_a_toy_algorithm_from_one_module_and_one_yaml_runs_mode_dry(toy):
    cfg = compose_config(*toy_overrides(toy), "mode=dry", "data=synthetic")
    run = Run(cfg, run_dir=str(toy / "dry"))
    report = run()
    assert type(run.algorithm).__name__ == "ReinforceConfig" and run.algorithm.baseline_decay == 0.5
    assert "toy_reinforce" in registered(iterative=False)
    # 3 epochs over the synthetic split's train rows, K=4, all rows from the outset
    rows = report["train_rows"]
    assert report["algorithm"] == "toy_reinforce" and report["env_steps"] == 3 * rows * 4
    assert report["collected_candidates"] == 0 and report["comparator"] == "none"
    assert json.loads((toy / "dry" / "dry_run.json").read_text())["env_steps"] == report["env_steps"]


def test_the_smoke_experiment_trains_the_toy_algorithm_with_its_own_advantages(toy):
    """In-process, so the test reads the estimator's record: the smoke preset reaches an algorithm from outside the
    package, and every group's advantages are the running baseline's, not MAGRPO's group-centred ones."""
    run_dir = toy / "smoke"
    cfg = compose_config("experiment=smoke", "curriculum.train_per_cell=1", *toy_overrides(toy))
    import toy_reinforce

    toy_reinforce.RunningBaseline.calls.clear()
    Run(cfg, run_dir=str(run_dir))()
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    config = (run_dir / "config.yaml").read_text()
    # the smoke experiment's deltas and the OnlineOptions smoke preset (K=2, turn metrics every 4 env steps)
    assert "num_train_epochs: 2" in config and "num_generations: 2" in config and "logging_steps: 4" in config
    train = [r for r in records if "train/reward" in r]
    assert train and records[-1]["env_step"] == 2 * 2 * 2  # 2 epochs x 2 train rows (one per cell) x K=2
    assert any(r["train/loss_agent_0"] != 0.0 for r in train)
    calls = toy_reinforce.RunningBaseline.calls
    assert len(calls) == 2 * 2  # one group per row and epoch
    baseline = 0.0
    for rewards, advantages in calls:
        assert advantages == pytest.approx([r - baseline for r in rewards])
        baseline = 0.5 * baseline + 0.5 * sum(rewards) / len(rewards)
    assert any(abs(sum(advantages)) > 1e-6 for _, advantages in calls)  # not centred on the group mean
    # the checkpoints name the algorithm from its spec and keep the estimator's state
    last = max((run_dir / "checkpoints").iterdir(), key=lambda path: int(path.name.rsplit("_", 1)[1]))
    state = json.loads((last / "trainer.json").read_text())
    assert state["trainer"] == "toy_reinforce" and set(state["advantage"]) == {"baseline"}


def test_unknown_algorithm_options_are_named():
    cfg = compose_config("algorithm=madpo", "+algorithm.num_generations=4")
    with pytest.raises(AlgorithmConfigError, match=r"unknown option algorithm\.num_generations for algorithm=madpo"):
        algorithm_config(cfg.algorithm)


def test_each_yaml_equals_its_config_class_defaults():
    """Defaults live in the dataclass; the YAML spells them out. Interpolated options (device lists from the
    hardware option) are compared by what they resolve to under hardware=cpu."""
    for name in sorted(path.stem for path in (REPO_ROOT / "conf" / "algorithm").glob("*.yaml")):
        cfg = compose_config(f"algorithm={name}", "hardware=cpu")
        config = algorithm_config(cfg.algorithm)
        assert config == type(config)(), name
        assert spec_for(config).name == name


@pytest.mark.parametrize(
    "algorithm, override, option",
    [
        ("madpo_iter", "algorithm.comparator_devices=[cpu,cuda:0]", r"algorithm\.comparator_devices\[1\]='cuda:0'"),
        ("marlhf", "algorithm.reward_model_device=cuda:0", r"algorithm\.reward_model_device='cuda:0'"),
        ("marlhf_iter", "algorithm.reward_model_device=tpu", r"algorithm\.reward_model_device='tpu'"),
    ],
)
def test_a_bad_comparator_or_reward_model_device_fails_in_mode_dry(tmp_path, algorithm, override, option):
    from travel.agents.devices import DeviceError

    cfg = compose_config("mode=dry", "data=synthetic", "hardware=cpu", f"algorithm={algorithm}", override)
    with pytest.raises(DeviceError, match=option):
        Run(cfg, run_dir=str(tmp_path))()
    assert not (tmp_path / "dry_run.json").exists()


def test_a_device_beyond_the_hardware_options_gpus_fails_in_mode_dry(tmp_path):
    from travel.agents.devices import DeviceError

    cfg = compose_config("mode=dry", "data=synthetic", "hardware=1xb200", "algorithm=madpo_iter",
                         "algorithm.comparator_devices=[cuda:0,cuda:1]")
    with pytest.raises(DeviceError, match=r"comparator_devices\[1\]='cuda:1': the hardware option declares 1 GPU"):
        Run(cfg, run_dir=str(tmp_path))()
