"""The options a run checks in both modes before any weights load, so that `mode=dry` rejects everything a
training run would: the typed hardware and generation options (each validated on construction), whether the
hardware preset suits the algorithm, the algorithm's comparator and budget, the curriculum's eval pool, and the
algorithm's device options against the hardware option's declared GPUs (without touching CUDA). Each error
names its option."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omegaconf import OmegaConf

if TYPE_CHECKING:
    from travel.run import Run


def check_run_options(run: "Run") -> None:
    """What both modes check before any weights load: the algorithm, its comparator and budget, the
    generation settings, and every device option against the hardware option's declared GPUs."""
    from travel.agents.hardware import check_declared_device
    from travel.agents.layouts import layout_class
    from travel.logging.tracker import check_logger_options

    seed = run.cfg.seed
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed={seed!r}: expected an integer")
    hardware = run.hardware  # validated on construction, as is the generation group
    run.generation  # noqa: B018
    check_logger_options(str(run.cfg.logger.get("backend", "wandb")), run.cfg.logger.get("mode"))
    layout_class(str(OmegaConf.select(run.cfg, "actor.layout", default=None)))
    hardware.check_suits(run.algorithm.name)
    run.comparator_spec  # noqa: B018  (option combinations fail before the budget)
    run.budget  # noqa: B018  (bad options fail here, before any weights load)
    if not run.data.split.anchor:
        raise ValueError("curriculum.eval_per_cell=0: training evaluates the anchor panel, so the eval pool must not be empty")
    devices: dict[str, Any] = {}
    for option, value in run.algorithm.device_options().items():
        if isinstance(value, (list, tuple)):
            devices.update({f"{option}[{i}]": device for i, device in enumerate(value)})
        else:
            devices[option] = value
    for option, device in devices.items():
        check_declared_device(option, device, hardware.num_gpus)
