"""The options a run checks in both modes before any weights load, so that `mode=dry` rejects everything a
training run would: the algorithm's comparator and budget, the curriculum's eval pool, generation settings,
flags, the compute dtype, and every device option against the hardware option's declared GPUs (without
touching CUDA). Each error names its option."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omegaconf import OmegaConf

if TYPE_CHECKING:
    from travel.run import Run


def _number(option: str, value: Any, integer: bool = False) -> float:
    """A numeric option's value, or an error naming the option (an integer option is never truncated)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise ValueError(f"{option}={value!r}: expected {'an integer' if integer else 'a number'}")
    return value


def check_run_options(run: "Run") -> None:
    """What both modes check before any weights load: the algorithm, its comparator and budget, the
    generation settings, and every device option against the hardware option's declared GPUs."""
    from travel.agents.devices import check_declared_device
    from travel.algorithms.evaluation import eval_rows_per_call_option
    from travel.algorithms.rollout import rows_per_call_option
    from travel.generation.options import VALUE_MODES, check_choice, check_decode_matmul, check_decode_weights

    seed, threads = run.cfg.seed, run.cfg.hardware.get("torch_threads")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed={seed!r}: expected an integer")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"hardware.torch_threads={threads!r}: expected an integer >= 1 (or null)")
    cache = run.cfg.hardware.get("compile_cache_dir")
    if cache is not None and (not isinstance(cache, str) or not cache.strip()):
        raise ValueError(f"hardware.compile_cache_dir={cache!r}: expected a directory path (or null: torch's own)")
    from travel.agents.layouts import layout_class
    from travel.logging.tracker import check_logger_options

    check_logger_options(str(run.cfg.logger.get("backend", "wandb")), run.cfg.logger.get("mode"))
    layout_class(str(OmegaConf.select(run.cfg, "actor.layout", default=None)))
    run.comparator_spec  # noqa: B018  (option combinations fail before the budget)
    run.budget  # noqa: B018  (bad options fail here, before any weights load)
    if not run.data.split.anchor:
        raise ValueError("curriculum.eval_per_cell=0: training evaluates the anchor panel, so the eval pool must not be empty")
    generation = run.cfg.generation
    for key in ("max_new_tokens", "max_value_tokens"):
        if _number(f"generation.{key}", generation[key], integer=True) < 1:
            raise ValueError(f"generation.{key}={generation[key]}: must be >= 1")
    rows_per_call_option(OmegaConf.select(generation, "rows_per_call", default=None))
    eval_rows_per_call_option(OmegaConf.select(generation, "eval_rows_per_call", default=1))
    values = OmegaConf.select(generation, "values", default="free")
    check_choice("generation.values", values, VALUE_MODES)
    if not _number("generation.temperature", generation.temperature) > 0:
        raise ValueError(f"generation.temperature={generation.temperature}: must be > 0")
    if not 0 < _number("generation.top_p", generation.top_p) <= 1:
        raise ValueError(f"generation.top_p={generation.top_p}: must be in (0, 1]")
    hardware = run.cfg.hardware
    for option, flag in (
        ("generation.greedy_eval", generation.greedy_eval),
        ("generation.jump_forced", generation.get("jump_forced", False)),
        ("hardware.offload_inactive_actor", hardware.offload_inactive_actor),
        ("hardware.gradient_checkpointing", hardware.gradient_checkpointing),
        ("hardware.compile_decode", hardware.get("compile_decode", False)),
        ("hardware.compile_prefill", hardware.get("compile_prefill", False)),
        ("hardware.compile_update", hardware.get("compile_update", False)),
    ):
        if not isinstance(flag, bool):
            raise ValueError(f"{option}={flag!r}: expected true or false")
    checkpoint_layers = hardware.get("checkpoint_layers")
    if checkpoint_layers is not None:
        if isinstance(checkpoint_layers, bool) or not isinstance(checkpoint_layers, int) or checkpoint_layers < 0:
            raise ValueError(f"hardware.checkpoint_layers={checkpoint_layers!r}: expected an integer >= 0 (or null: all layers)")
        if not hardware.gradient_checkpointing:
            raise ValueError(
                f"hardware.checkpoint_layers={checkpoint_layers} needs hardware.gradient_checkpointing=true (it says how "
                "many decoder layers checkpoint)"
            )
    if hardware.parallel_training not in ("none", "per_device"):
        raise ValueError(f"hardware.parallel_training={hardware.parallel_training!r}: choose none or per_device")
    compute_dtype = hardware.get("compute_dtype")
    if compute_dtype is not None:
        from travel.agents.models import resolve_dtype

        try:
            resolve_dtype(compute_dtype)
        except ValueError:
            raise ValueError(
                f"hardware.compute_dtype={compute_dtype!r}: not a floating torch dtype (bfloat16, float16, float32)"
            ) from None
    check_decode_weights(hardware.get("decode_weights", "master"), compute_dtype)
    check_decode_matmul(hardware.get("decode_matmul", "split_k"))
    gpus = _number("hardware.num_gpus", hardware.num_gpus, integer=True)
    devices = {f"hardware.agent_devices[{i}]": device for i, device in enumerate(hardware.agent_devices)}
    for option, value in run.algorithm.device_options().items():
        if isinstance(value, (list, tuple)):
            devices.update({f"{option}[{i}]": device for i, device in enumerate(value)})
        else:
            devices[option] = value
    for option, device in devices.items():
        check_declared_device(option, device, gpus)
