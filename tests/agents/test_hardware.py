"""The typed hardware options (travel/agents/hardware.py): the base preset is the dataclass's defaults, each rule
between options is checked on construction with an error naming the option, and a preset names the algorithms it
does not suit."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from tests.conftest import CONF, compose_config
from travel.agents.hardware import DeviceError, HardwareConfig


def test_the_base_preset_is_the_defaults():
    assert HardwareConfig.from_mapping(compose_config("hardware=base").hardware) == HardwareConfig()
    assert OmegaConf.load(CONF / "hardware" / "base.yaml")._target_ == "travel.agents.hardware.HardwareConfig"


def test_comparator_and_reward_model_devices_follow_the_actors_unless_set():
    hardware = HardwareConfig.from_mapping({"num_gpus": 2, "agent_devices": ["cuda:1", "cuda:0"]})
    assert hardware.comparator_devices == ("cuda:1", "cuda:0") and hardware.reward_model_device == "cuda:1"
    preset = HardwareConfig.from_mapping(compose_config("hardware=2gpu_preference").hardware)
    assert preset.agent_devices == ("cuda:0", "cuda:0") and preset.comparator_devices == ("cuda:1", "cuda:1")
    assert preset.reward_model_device == "cuda:1"


@pytest.mark.parametrize(
    "options, message",
    [
        ({"checkpoint_layers": 4}, "hardware.checkpoint_layers=4 needs hardware.gradient_checkpointing=true"),
        ({"num_gpus": 2, "agent_devices": ["cuda:0", "cuda:0"], "parallel_training": "per_device"},
         "hardware.parallel_training=per_device needs two different hardware.agent_devices"),
        ({"agent_devices": ["cuda:0", "cpu"]}, "hardware.agent_devices[0]='cuda:0': the hardware option declares no GPU"),
        ({"num_gpus": 1, "agent_devices": ["cuda:0", "cuda:0"], "reward_model_device": "cuda:1"},
         "hardware.reward_model_device='cuda:1': the hardware option declares 1 GPU(s)"),
        ({"comparator_devices": ["gpu", "cpu"]}, "hardware.comparator_devices[0]='gpu': expected a device string"),
        ({"decode_weights": "copy"}, "hardware.decode_weights=copy needs hardware.compute_dtype"),
        ({"gpu_memory_gib": 0}, "hardware.gpu_memory_gib=0: must be > 0"),
        ({"unsuited": {"magrpo": 2}}, "hardware.unsuited="),
        ({"num_gpus": True}, "hardware.num_gpus=True"),
        ({"flash": True}, "hardware.flash: not a hardware option"),
        ({"step_backend": "graph"}, "hardware.step_backend"),
        ({"share_prompt_cache": "sometimes"}, "hardware.share_prompt_cache"),
        ({"prefix_attention": "flash"}, "hardware.prefix_attention"),
    ],
)
def test_each_rule_is_checked_on_construction_naming_the_option(options, message):
    with pytest.raises(ValueError) as raised:
        HardwareConfig.from_mapping(options)
    assert message in str(raised.value)
    if "device" in message and "declares" in message:
        assert isinstance(raised.value, DeviceError)


def test_a_preset_names_the_preset_for_an_algorithm_it_does_not_suit():
    two = HardwareConfig.from_mapping(compose_config("hardware=2gpu").hardware)
    two.check_suits("magrpo")
    with pytest.raises(ValueError, match="algorithm=marlhf_iter does not suit hardware=2gpu: use hardware=2gpu_preference"):
        two.check_suits("marlhf_iter")


def test_a_null_preset_in_unsuited_lifts_a_refusal():
    """An experiment whose models are small enough keeps its preset for an algorithm the preset refuses."""
    with pytest.raises(ValueError, match="algorithm=marlhf does not suit hardware=1x80gb: use hardware=2gpu_preference"):
        HardwareConfig.from_mapping(compose_config("hardware=1x80gb").hardware).check_suits("marlhf")
    lifted = HardwareConfig.from_mapping(compose_config("experiment=smollm2_gpu_marlhf", "data.path=rows.jsonl").hardware)
    lifted.check_suits("marlhf")
    lifted.check_suits("marlhf_iter")
