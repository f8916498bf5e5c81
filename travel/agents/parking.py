"""Parking an actor on the host: its weights, gradients, buffers and optimizer state wait in reusable host
memory while another actor trains on the GPU, and come back unchanged.

`model.to("cpu")` copies through pageable memory and allocates fresh host tensors on every move; for a
4B-parameter actor with AdamW state that is about 24 GB each way, every update. A `HostStash` keeps host
tensors by (shape, dtype) and hands them out again: pinned when CUDA is available, so the copies run at
DMA speed, and allocated only once per shape (both actors of one model share them, one parked at a time).

Parking swaps `.data` (and `.grad`) of each parameter object in place, so tied weights stay tied, the
optimizer's state stays keyed by the same parameters and nothing outside sees a new object.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

import torch

from travel.generation.model_io import model_device

Getter = Callable[[], torch.Tensor | None]
Setter = Callable[[torch.Tensor | None], None]


class HostStash:
    """Host tensors handed out by (shape, dtype) and returned for reuse; pinned when `pin` (default: CUDA exists).

    When pinned memory runs out (it is page-locked RAM, often limited), the stash warns once and hands out
    pageable tensors from then on: slower moves, same results.
    """

    def __init__(self, pin: bool | None = None):
        self.pin = torch.cuda.is_available() if pin is None else bool(pin)
        self._free: dict[tuple[tuple[int, ...], torch.dtype], list[torch.Tensor]] = defaultdict(list)
        self.allocated_bytes = 0

    def take(self, like: torch.Tensor) -> torch.Tensor:
        free = self._free[(tuple(like.shape), like.dtype)]
        if free:
            return free.pop()
        if self.pin:
            try:
                tensor = torch.empty(like.shape, dtype=like.dtype, device="cpu", pin_memory=True)
            except RuntimeError as error:
                warnings.warn(
                    f"pinned host memory is unavailable after {self.allocated_bytes / 2**30:.1f} GiB ({error}); "
                    "parked actors continue in pageable memory"
                )
                self.pin = False
        if not self.pin:
            tensor = torch.empty(like.shape, dtype=like.dtype, device="cpu")
        self.allocated_bytes += like.numel() * like.element_size()
        return tensor

    def give(self, tensor: torch.Tensor) -> None:
        self._free[(tuple(tensor.shape), tensor.dtype)].append(tensor)


@dataclass
class _Slot:
    """One tensor-holding place of an actor: a parameter's data or grad, a buffer, an optimizer state entry."""

    get: Getter
    set: Setter
    is_grad: bool = False  # grads are set after the data: a grad on another device than its data is rejected


@dataclass
class ParkedActor:
    """What `park` moved: each slot's host tensor, to be restored onto `device` by `unpark`."""

    device: torch.device
    slots: list[tuple[_Slot, torch.Tensor]] = field(default_factory=list)


def _param_slots(param: torch.nn.Parameter) -> list[_Slot]:
    def set_data(tensor):
        param.grad = None  # restored by the grad slot right after, on the data's new device
        param.data = tensor

    def set_grad(tensor):
        param.grad = tensor

    return [_Slot(lambda: param.data, set_data), _Slot(lambda: param.grad, set_grad, is_grad=True)]


def _buffer_slot(module: torch.nn.Module, name: str) -> _Slot:
    def set_buffer(tensor):
        module._buffers[name] = tensor

    return _Slot(lambda: module._buffers[name], set_buffer)


def _state_slot(state: dict, key: str) -> _Slot:
    def set_state(tensor):
        state[key] = tensor

    return _Slot(lambda: state[key], set_state)


def actor_slots(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None) -> list[_Slot]:
    """Every tensor of the actor that lives on its device: parameters (tied ones once) with their grads,
    buffers, and the optimizer's per-parameter state except AdamW's scalar `step` (kept where torch keeps it)."""
    slots: list[_Slot] = []
    for param in model.parameters():  # deduplicated: a tied weight is one parameter object
        slots.extend(_param_slots(param))
    seen: set[int] = set()
    for module in model.modules():
        for name, buffer in module._buffers.items():
            if buffer is not None and id(buffer) not in seen:
                seen.add(id(buffer))
                slots.append(_buffer_slot(module, name))
    if optimizer is not None:
        for state in optimizer.state.values():
            for key, value in state.items():
                if torch.is_tensor(value) and key != "step":
                    slots.append(_state_slot(state, key))
    return slots


def park(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None, stash: HostStash) -> ParkedActor:
    """Copy every device tensor of the actor into the stash's host tensors and point the actor at them."""
    parked = ParkedActor(device=model_device(model))
    for slot in actor_slots(model, optimizer):
        tensor = slot.get()
        if tensor is None:
            continue
        host = stash.take(tensor)
        host.copy_(tensor, non_blocking=host.is_pinned())
        parked.slots.append((slot, host))
    if parked.device.type == "cuda":
        torch.cuda.synchronize(parked.device)  # the host copies must be complete before anyone reads them
    _set_all(parked.slots)
    return parked


def unpark(parked: ParkedActor, stash: HostStash) -> None:
    """Copy the parked tensors back to their device and return the host tensors to the stash.

    A host tensor goes back to the stash as soon as its copy is queued: later copies into it run on the same
    stream, after this one.
    """
    restored = [(slot, host.to(parked.device, non_blocking=host.is_pinned(), copy=True)) for slot, host in parked.slots]
    _set_all(restored)
    for _, host in parked.slots:
        stash.give(host)
    parked.slots.clear()


def _set_all(assignments: list[tuple[_Slot, torch.Tensor]]) -> None:
    """Set every slot, grads after all data (setting a parameter's data clears its grad)."""
    for slot, tensor in assignments:
        if not slot.is_grad:
            slot.set(tensor)
    for slot, tensor in assignments:
        if slot.is_grad:
            slot.set(tensor)
