"""Structured decoding of role actions: chat rendering, forced JSON skeleton, value masks and log-probs.

docs/decoding.md follows one decode call through these modules and names the option that switches each part.

The names below load on first use: importing one light module of the package (`model_io`, `requests`) does not
pull in the decoder and transformers' model code, so `mode=dry` and a sweep's parent process start without them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# each public name and the module that defines it
_EXPORTS = {
    "Candidate": "requests",
    "ChatTemplateError": "chat",
    "DecodeRequest": "requests",
    "StructuredDecoder": "decoder",
    "render_chat_prompt": "chat",
    "render_role_prompt": "chat",
    "joint_request": "requests",
    "role_request": "requests",
}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:
    from travel.generation.chat import ChatTemplateError, render_chat_prompt, render_role_prompt
    from travel.generation.decoder import StructuredDecoder
    from travel.generation.requests import Candidate, DecodeRequest, joint_request, role_request


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:  # a submodule (`from travel.generation import sampling`) is imported by the caller
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
