"""The generation option group (conf/generation/): sampling, token budgets, value vocabulary and how many rows a
decode call takes. `GenerationConfig` validates every option on construction; the dry run, the layouts' decoders
and the samplers read the same object. No torch here (travel/options.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from travel.generation.options import VALUE_MODES, check_choice
from travel.options import check_bool, check_int, check_number, from_mapping


@dataclass(frozen=True)
class GenerationConfig:
    """conf/generation/structured.yaml documents each field."""

    temperature: float = 0.7
    top_p: float = 0.8
    max_new_tokens: int = 1024
    max_value_tokens: int = 32
    greedy_eval: bool = True
    values: str = "free"
    jump_forced: bool = False
    rows_per_call: Optional[int] = None
    eval_rows_per_call: int = 4

    def __post_init__(self) -> None:
        if not check_number("generation.temperature", self.temperature) > 0:
            raise ValueError(f"generation.temperature={self.temperature}: must be > 0")
        if not 0 < check_number("generation.top_p", self.top_p) <= 1:
            raise ValueError(f"generation.top_p={self.top_p}: must be in (0, 1]")
        object.__setattr__(self, "temperature", float(self.temperature))
        object.__setattr__(self, "top_p", float(self.top_p))
        check_int("generation.max_new_tokens", self.max_new_tokens, 1)
        check_int("generation.max_value_tokens", self.max_value_tokens, 1)
        check_bool("generation.greedy_eval", self.greedy_eval)
        check_bool("generation.jump_forced", self.jump_forced)
        check_choice("generation.values", self.values, VALUE_MODES)
        check_int("generation.rows_per_call", self.rows_per_call, 1, optional=True, none_means="a whole buffer")
        check_int("generation.eval_rows_per_call", self.eval_rows_per_call, 1)

    @classmethod
    def from_mapping(cls, cfg: Any) -> "GenerationConfig":
        return from_mapping(cls, cfg, "generation")
