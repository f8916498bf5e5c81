"""Device placement: validate `hardware.agent_devices` before any weights load, and move an actor's model
and optimizer state between its device and the CPU."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from travel.agents.hardware import DeviceError

OPTION = "hardware.agent_devices"


def _device_of(where: str, text: Any) -> torch.device:
    """A 'cpu' or 'cuda[:N]' string as a torch.device, or an error that starts with `where`."""
    if not isinstance(text, str) or not text.strip():
        raise DeviceError(f"{where}: expected a device string such as 'cpu' or 'cuda:0'")
    try:
        device = torch.device(text.strip())
    except (RuntimeError, ValueError) as exc:
        raise DeviceError(f"{where}: not a device string ({exc})") from None
    if device.type not in ("cpu", "cuda"):
        raise DeviceError(f"{where}: only 'cpu' and 'cuda:N' are supported")
    return device


def parse_device(text: Any, index: int) -> torch.device:
    """One entry of hardware.agent_devices as a torch.device that exists on this machine."""
    where = f"{OPTION}[{index}]={text!r}"
    device = _device_of(where, text)
    if device.type == "cpu":
        return device
    if not torch.cuda.is_available():
        raise DeviceError(f"{where}: CUDA is not available on this machine (use hardware=cpu)")
    count = torch.cuda.device_count()
    device_index = 0 if device.index is None else device.index
    if device_index >= count:
        raise DeviceError(f"{where}: this machine has {count} CUDA device(s) (cuda:0..cuda:{count - 1})")
    return torch.device("cuda", device_index)


def agent_devices(devices: Sequence[Any], parallel_training: str = "none") -> tuple[torch.device, ...]:
    """Both agents' devices, checked; `parallel_training=per_device` needs two different devices."""
    if isinstance(devices, str) or len(devices) != 2:
        raise DeviceError(f"{OPTION}={list(devices) if not isinstance(devices, str) else devices!r}: give one device per agent")
    parsed = tuple(parse_device(text, index) for index, text in enumerate(devices))
    if parallel_training not in ("none", "per_device"):
        raise DeviceError(f"hardware.parallel_training={parallel_training!r}: choose none or per_device")
    if parallel_training == "per_device" and parsed[0] == parsed[1]:
        raise DeviceError(
            f"hardware.parallel_training=per_device needs two different {OPTION}, got {[str(d) for d in parsed]}"
        )
    return parsed


def move_optimizer_state(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """Moves moment buffers; AdamW's scalar `step` stays where torch keeps it (on the CPU unless capturable)."""
    for state in optimizer.state.values():
        for key, value in state.items():
            if torch.is_tensor(value) and key != "step":
                state[key] = value.to(device, non_blocking=False)


def move_actor(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None, device: torch.device) -> None:
    model.to(device)
    if optimizer is not None:
        move_optimizer_state(optimizer, device)
