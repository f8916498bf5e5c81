"""The hardware option group (conf/hardware/): where the models live, how they train and decode, and what the
card holds. `HardwareConfig` validates every option and every rule between options on construction; the dry
run, the layouts and the trainers read the same object. No torch here (travel/options.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from travel.generation.options import (
    PREFIX_KERNELS,
    PROMPT_CACHE_SHARING,
    STEP_BACKENDS,
    check_choice,
    check_decode_matmul,
    check_decode_weights,
)
from travel.options import check_bool, check_int, check_number, float_dtype_name, from_mapping

PARALLEL_TRAINING = ("none", "per_device")
_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?)$")


class DeviceError(ValueError):
    """A device option that cannot work (here or on this machine); the message names the option."""


def check_declared_device(option: str, text: Any, declared_gpus: int) -> None:
    """A device option ('cpu' or 'cuda[:N]') against the declared GPU count (`hardware.num_gpus`), without touching
    CUDA, so that mode=dry catches it on any machine."""
    where = f"{option}={text!r}"
    if not isinstance(text, str) or not _DEVICE.match(text.strip()):
        raise DeviceError(f"{where}: expected a device string such as 'cpu' or 'cuda:0'")
    text = text.strip()
    if text == "cpu":
        return
    index = int(text.partition(":")[2] or 0)
    if index >= declared_gpus:
        gpus = "no GPU" if declared_gpus == 0 else f"{declared_gpus} GPU(s), cuda:0..cuda:{declared_gpus - 1}"
        raise DeviceError(f"{where}: the hardware option declares {gpus} (hardware.num_gpus)")


def _devices(option: str, value: Any, count: int) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or len(value) != count:
        raise DeviceError(f"{option}={value!r}: give one device per agent")
    return tuple(value)


@dataclass(frozen=True)
class HardwareConfig:
    """conf/hardware/base.yaml documents each field."""

    name: str = "base"
    num_gpus: int = 0
    gpu_memory_gib: Optional[float] = None
    agent_devices: tuple[str, ...] = ("cpu", "cpu")
    comparator_devices: Optional[tuple[str, ...]] = None  # None: the agent devices
    reward_model_device: Optional[str] = None  # None: the first agent device
    parallel_training: str = "none"
    unsuited: Mapping[str, str] = field(default_factory=dict)
    offload_inactive_actor: bool = False
    torch_threads: Optional[int] = None
    compute_dtype: Optional[str] = None
    decode_weights: str = "master"
    decode_matmul: str = "split_k"
    step_backend: str = "auto"
    share_prompt_cache: str = "auto"
    prefix_attention: str = "auto"
    compile_decode: bool = False
    compile_prefill: bool = False
    compile_update: bool = False
    compile_cache_dir: Optional[str] = None
    gradient_checkpointing: bool = False
    checkpoint_layers: Optional[int] = None
    slurm: Mapping[str, Any] = field(
        default_factory=lambda: {"partition": None, "account": None, "gpus_per_node": 0, "cpus_per_task": 2, "mem_gb": 8, "timeout_min": 60}
    )

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"hardware.name={self.name!r}: expected the preset's name")
        check_int("hardware.num_gpus", self.num_gpus, 0)
        if self.gpu_memory_gib is not None and not check_number("hardware.gpu_memory_gib", self.gpu_memory_gib) > 0:
            raise ValueError(f"hardware.gpu_memory_gib={self.gpu_memory_gib!r}: must be > 0 (or null: no check before the run)")
        object.__setattr__(self, "agent_devices", _devices("hardware.agent_devices", self.agent_devices, 2))
        if self.comparator_devices is None:
            object.__setattr__(self, "comparator_devices", self.agent_devices)
        if self.reward_model_device is None:
            object.__setattr__(self, "reward_model_device", self.agent_devices[0])
        object.__setattr__(self, "comparator_devices", _devices("hardware.comparator_devices", self.comparator_devices, 2))
        devices = {f"hardware.agent_devices[{i}]": d for i, d in enumerate(self.agent_devices)}
        devices.update({f"hardware.comparator_devices[{i}]": d for i, d in enumerate(self.comparator_devices)})
        devices["hardware.reward_model_device"] = self.reward_model_device
        for option, device in devices.items():
            check_declared_device(option, device, self.num_gpus)
        check_choice("hardware.parallel_training", self.parallel_training, PARALLEL_TRAINING)
        if self.parallel_training == "per_device" and self.agent_devices[0].strip() == self.agent_devices[1].strip():
            raise DeviceError(
                f"hardware.parallel_training=per_device needs two different hardware.agent_devices, got {list(self.agent_devices)}"
            )
        # a null preset lifts the base preset's refusal (an experiment whose small models fit, say)
        if not isinstance(self.unsuited, Mapping) or not all(v is None or isinstance(v, str) for v in self.unsuited.values()):
            raise ValueError(f"hardware.unsuited={self.unsuited!r}: expected algorithm: preset pairs (null: suited)")
        for option in ("offload_inactive_actor", "compile_decode", "compile_prefill", "compile_update", "gradient_checkpointing"):
            check_bool(f"hardware.{option}", getattr(self, option))
        check_int("hardware.torch_threads", self.torch_threads, 1, optional=True, none_means="torch's default")
        if self.compute_dtype is not None:
            object.__setattr__(self, "compute_dtype", float_dtype_name("hardware.compute_dtype", self.compute_dtype))
        check_decode_weights(self.decode_weights, self.compute_dtype)
        check_decode_matmul(self.decode_matmul)
        check_choice("hardware.step_backend", self.step_backend, STEP_BACKENDS)
        check_choice("hardware.share_prompt_cache", self.share_prompt_cache, PROMPT_CACHE_SHARING)
        check_choice("hardware.prefix_attention", self.prefix_attention, PREFIX_KERNELS)
        if self.compile_cache_dir is not None and (not isinstance(self.compile_cache_dir, str) or not self.compile_cache_dir.strip()):
            raise ValueError(f"hardware.compile_cache_dir={self.compile_cache_dir!r}: expected a directory path (or null: torch's own)")
        check_int("hardware.checkpoint_layers", self.checkpoint_layers, 0, optional=True, none_means="all layers")
        if self.checkpoint_layers is not None and not self.gradient_checkpointing:
            raise ValueError(
                f"hardware.checkpoint_layers={self.checkpoint_layers} needs hardware.gradient_checkpointing=true (it says how "
                "many decoder layers checkpoint); set hardware.checkpoint_layers=null without checkpointing"
            )

    @classmethod
    def from_mapping(cls, cfg: Any) -> "HardwareConfig":
        return from_mapping(cls, cfg, "hardware")

    def check_suits(self, algorithm: str) -> None:
        """An error naming the preset to use where this layout does not suit `algorithm`."""
        instead = self.unsuited.get(algorithm)
        if instead is not None:
            raise ValueError(f"algorithm={algorithm} does not suit hardware={self.name}: use hardware={instead}")

    @property
    def per_device(self) -> bool:
        return self.parallel_training == "per_device"
