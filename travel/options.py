"""What the typed option groups share (hardware, generation; travel/agents/hardware.py,
travel/generation/config.py): building a frozen dataclass from a mapping, and checks whose errors name the option.
No torch here: `mode=dry` reads these before any model code loads."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any, Mapping, TypeVar

T = TypeVar("T")

DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}
FLOAT_DTYPES = ("bfloat16", "float16", "float32", "float64")


def float_dtype_name(option: str, value: Any) -> str:
    """The canonical name of a floating dtype option (aliases such as bf16 accepted), or an error naming it."""
    name = DTYPE_ALIASES.get(str(value), str(value))
    if not isinstance(value, str) or name not in FLOAT_DTYPES:
        raise ValueError(f"{option}={value!r}: not a floating torch dtype (use bfloat16, float16 or float32)")
    return name


def plain_mapping(cfg: Any, group: str) -> dict[str, Any]:
    """A dict of `cfg` (a dict or an OmegaConf node, resolved), or an error naming the group."""
    from omegaconf import DictConfig, OmegaConf

    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    if not isinstance(cfg, Mapping):
        raise TypeError(f"{group}: expected a mapping of options, got {type(cfg).__name__}")
    return dict(cfg)


def from_mapping(cls: type[T], cfg: Any, group: str) -> T:
    """`cls` built from `cfg`: missing keys keep the defaults, `_target_` is ignored, any other unknown key is an
    error naming `group.key`. A config already of `cls` is returned as it is."""
    if isinstance(cfg, cls):
        return cfg
    values = plain_mapping(cfg, group)
    known = {option.name for option in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(str(key) for key in values if key not in known and key != "_target_")
    if unknown:
        raise ValueError(f"{group}.{unknown[0]}: not a {group} option" + (f" (also: {', '.join(unknown[1:])})" if unknown[1:] else ""))
    return cls(**{key: value for key, value in values.items() if key in known})


def check_int(option: str, value: Any, minimum: int, optional: bool = False, none_means: str = "") -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        tail = f" (or null: {none_means})" if optional and none_means else " (or null)" if optional else ""
        raise ValueError(f"{option}={value!r}: expected an integer >= {minimum}{tail}")


def check_bool(option: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{option}={value!r}: expected true or false")


def check_number(option: str, value: Any) -> float:
    """A finite number, or an error naming the option."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{option}={value!r}: expected a number")
    return float(value)
