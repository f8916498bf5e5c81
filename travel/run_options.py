"""The options a run checks in both modes before any weights load, so that `mode=dry` rejects everything a
training run would: the typed hardware and generation options (each validated on construction), whether the
hardware preset suits the algorithm, the algorithm's comparator and budget, the curriculum's eval pool, and the
algorithm's device options against the hardware option's declared GPUs (without touching CUDA). Each error
names its option."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omegaconf import OmegaConf

from travel.agents.hardware import check_declared_device
from travel.agents.layouts import layout_class
from travel.checkpoint.store import CheckpointError, check_checkpoint_options, checkpoint_env_step
from travel.logging.tracker import check_logger_options
from travel.options import float_dtype_name

if TYPE_CHECKING:
    from travel.run import Run


def check_run_options(run: "Run") -> None:
    """What both modes check before any weights load: the algorithm, its comparator and budget, the
    generation settings, and every device option against the hardware option's declared GPUs."""

    seed = run.cfg.seed
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"seed={seed!r}: expected an integer in [0, 2**32) (NumPy's seed range)")
    hardware = run.hardware  # validated on construction, as is the generation group
    run.generation  # noqa: B018
    float_dtype_name("model.dtype", OmegaConf.select(run.cfg, "model.dtype", default="float32"))
    check_logger_options(str(run.cfg.logger.get("backend", "wandb")), run.cfg.logger.get("mode"))
    layout = layout_class(str(OmegaConf.select(run.cfg, "actor.layout", default=None)))
    hardware.check_suits(run.algorithm.name)
    if layout.num_policies == 1 and hardware.per_device:
        raise ValueError(
            f"actor={layout.name} trains one policy, but hardware={hardware.name} trains one actor per GPU "
            "(parallel_training=per_device): use a one-GPU preset (hardware=1x80gb or 1xb200)"
        )
    spec = run.comparator_spec  # option combinations fail before the budget
    if layout.joint and spec.generation_mode == "centralized" and spec.teacher_agent_index != 0:
        raise ValueError(
            f"generation_mode.teacher_agent_index={spec.teacher_agent_index}: with actor={layout.name} the joint actor "
            "is the only policy (index 0)"
        )
    check_resume_options(run)
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


def check_resume_options(run: "Run") -> None:
    """The checkpoint options, and `resume=`: an algorithm that writes checkpoints, and a complete checkpoint at a
    path given (its files are verified when the run loads it)."""
    from pathlib import Path

    options = run.cfg.get("checkpoint")
    if not OmegaConf.is_dict(options):
        raise ValueError(f"checkpoint={options!r}: training takes checkpoint.every_env_steps and checkpoint.keep")
    check_checkpoint_options(options.get("keep", 2), options.get("every_env_steps"))
    resume = run.resume  # resume=auto too where Slurm requeued the job
    if resume is None:
        return
    if not run.algorithm_spec.checkpoints:
        raise ValueError(
            f"resume={resume}: algorithm={run.algorithm.name} writes no checkpoints yet, so it cannot "
            f"resume (algorithms with checkpoints: see README, \"Checkpoints, resume and evaluating saved actors\")"
        )
    if str(resume) != "auto" and checkpoint_env_step(Path(str(resume))) is None:
        raise CheckpointError(f"resume={resume}: not a complete checkpoint (checkpoints/env_step_<N> with checkpoint.json)")
