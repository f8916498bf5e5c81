"""How a shared-prefix decode step's queries attend over their prompt's prefix and their own suffix.

Both kernels compute the same attention: a row's queries score the prompt's prefix keys and the row's own
suffix keys, one softmax normalises both parts, and the weights mix both parts' values.

- `joint_softmax_attention` scores a prompt's K x group queries against the prefix in one matmul, concatenates
  the suffix scores and runs one float32 softmax. Every step writes and reads the (prompts, kv heads, K x group,
  width) scores several times.
- `flex_prefix_attention` reads the prefix with one FlexAttention kernel, which returns the prefix's own softmax
  output and its log-sum-exp; the small suffix part is scored as before, and the two parts are merged under
  their joint normaliser. On CUDA it runs FlexAttention through torch.compile (inside an already compiled
  forward it is traced with it). Elsewhere FlexAttention runs its eager reference, which materialises the
  scores again (torch's CPU kernel cannot return the log-sum-exp): correct, for tests, and not fast.

`bench/prefix_attention.py` times both alone. On an H200 (torch 2.11; 36 layers, 32/8 heads x 128, bf16, one
graph replay per step) the joint softmax took 5.19 ms per step for 20 candidates of a 6,000-token prompt
(5.7x its 0.91 ms floor), 1.81 ms for one candidate and 13.86 ms for 10 prompts x 4 candidates of 9,000
tokens; FlexAttention took 737, 14.3 and 23.5 ms. So `auto` is the joint softmax on every device, and `flex`
stays an explicit choice, the seam where a faster fused prefix kernel goes.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

try:
    from torch.nn.attention.flex_attention import flex_attention
except ImportError:  # torch < 2.5
    flex_attention = None  # type: ignore[assignment]

PREFIX_KERNELS = ("auto", "joint_softmax", "flex")
_COMPILED_FLEX: Any = None


def to_prompts(tensor: torch.Tensor, prompts: int, repeats: int) -> torch.Tensor:
    """(rows, H, group, X) -> (prompts, H, K x group, X)."""
    rows, heads, group, last = tensor.shape
    return tensor.reshape(prompts, repeats, heads, group, last).transpose(1, 2).reshape(prompts, heads, repeats * group, last)


def to_rows(tensor: torch.Tensor, prompts: int, repeats: int) -> torch.Tensor:
    """(prompts, H, K x group, X) -> (rows, H, group, X)."""
    heads, last = tensor.shape[1], tensor.shape[-1]
    group = tensor.shape[2] // repeats
    return tensor.reshape(prompts, heads, repeats, group, last).transpose(1, 2).reshape(prompts * repeats, heads, group, last)


def prefix_kernel(name: str) -> str:
    """The kernel `name` asks for; `auto` is `joint_softmax`, the faster one measured (see above)."""
    if name not in PREFIX_KERNELS:
        raise ValueError(f"prefix_attention must be one of {', '.join(PREFIX_KERNELS)}; got {name!r}")
    if name == "flex" and flex_attention is None:
        raise ValueError("prefix_attention='flex' needs torch >= 2.5 (torch.nn.attention.flex_attention)")
    return "joint_softmax" if name == "auto" else name


def joint_softmax_attention(
    per_row: torch.Tensor,
    prefix_keys: torch.Tensor,
    prefix_values: torch.Tensor,
    prefix_bias: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    suffix_mask: torch.Tensor,
    scale: float,
    repeats: int,
) -> torch.Tensor:
    """Queries `per_row` (rows, kv heads, group, head dim), rows prompt-major; the prompts' (prompts, kv heads,
    width, head dim) prefix under its (prompts, 1, 1, width) additive bias; each row's (rows, kv heads, capacity,
    head dim) suffix under `suffix_mask` (rows, 1, group or 1, capacity). Returns (rows, kv heads, group, head dim)."""
    prompts, width = prefix_keys.shape[0], prefix_keys.shape[2]
    per_prompt = to_prompts(per_row, prompts, repeats)
    prefix_scores = torch.matmul(per_prompt, prefix_keys.transpose(-1, -2)).float() * scale + prefix_bias
    suffix_scores = torch.matmul(per_row, key.transpose(-1, -2)).float() * scale + suffix_mask
    suffix_scores = to_prompts(suffix_scores, prompts, repeats)
    weights = torch.softmax(torch.cat([prefix_scores, suffix_scores], dim=-1), dim=-1).to(value.dtype)
    from_prefix = torch.matmul(weights[..., :width], prefix_values)  # (prompts, kv heads, K x group, head dim)
    from_suffix = torch.matmul(to_rows(weights[..., width:], prompts, repeats), value)
    return to_rows(from_prefix, prompts, repeats) + from_suffix


def flex_prefix_attention(
    per_row: torch.Tensor,
    prefix_keys: torch.Tensor,
    prefix_values: torch.Tensor,
    prefix_bias: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    suffix_mask: torch.Tensor,
    scale: float,
    repeats: int,
) -> torch.Tensor:
    """`joint_softmax_attention`'s contract, with the prefix read by one FlexAttention kernel."""
    prompts = prefix_keys.shape[0]
    bias = prefix_bias[:, 0, 0]  # (prompts, width)

    def padding(score: torch.Tensor, b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return score + bias[b, kv]

    attend = flex_attention if torch.compiler.is_compiling() or not per_row.is_cuda else _compiled_flex()
    from_prefix, prefix_lse = _flex_with_lse(attend, to_prompts(per_row, prompts, repeats), prefix_keys, prefix_values, padding, scale)
    from_prefix = to_rows(from_prefix, prompts, repeats).float()  # normalised over the prefix alone
    prefix_lse = to_rows(prefix_lse.unsqueeze(-1), prompts, repeats)  # (rows, kv heads, group, 1)
    suffix_scores = torch.matmul(per_row, key.transpose(-1, -2)).float() * scale + suffix_mask
    total = torch.logaddexp(prefix_lse, torch.logsumexp(suffix_scores, dim=-1, keepdim=True))
    suffix_weights = torch.exp(suffix_scores - total).to(value.dtype)  # the joint softmax over the suffix columns
    output = from_prefix * torch.exp(prefix_lse - total) + torch.matmul(suffix_weights, value).float()
    return output.to(value.dtype)


def _compiled_flex() -> Any:
    global _COMPILED_FLEX
    if _COMPILED_FLEX is None:
        _COMPILED_FLEX = torch.compile(flex_attention)
    return _COMPILED_FLEX


def _flex_with_lse(attend: Any, query, key, value, score_mod, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    if attend is flex_attention and not torch.compiler.is_compiling():
        with warnings.catch_warnings():  # the eager reference warns that it is not the fused kernel: known, see above
            warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
            return _flex_call(attend, query, key, value, score_mod, scale)
    return _flex_call(attend, query, key, value, score_mod, scale)


def _flex_call(attend: Any, query, key, value, score_mod, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    try:
        from torch.nn.attention.flex_attention import AuxRequest
    except ImportError:  # torch < 2.9 returns the log-sum-exp with return_lse
        return attend(query, key, value, score_mod=score_mod, scale=scale, return_lse=True)
    output, aux = attend(query, key, value, score_mod=score_mod, scale=scale, return_aux=AuxRequest(lse=True))
    return output, aux.lse


KERNELS = {"joint_softmax": joint_softmax_attention, "flex": flex_prefix_attention}
