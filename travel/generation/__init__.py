"""Structured decoding of role actions: chat rendering, forced JSON skeleton, value masks and log-probs.

docs/decoding.md follows one decode call through these modules and names the option that switches each part.
"""

from travel.generation.chat import (
    ChatTemplateError,
    render_chat_prompt,
    render_role_prompt,
)
from travel.generation.decoder import StructuredDecoder
from travel.generation.requests import Candidate, DecodeRequest, joint_request, role_request

__all__ = [
    "Candidate",
    "ChatTemplateError",
    "DecodeRequest",
    "StructuredDecoder",
    "render_chat_prompt",
    "render_role_prompt",
    "joint_request",
    "role_request",
]
