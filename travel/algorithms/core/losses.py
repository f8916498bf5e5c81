"""Value-token log-probabilities with gradients, and the MAGRPO advantage-weighted loss
(docs/algorithms.md "Value-token loss").

For a sequence with prompt ids p (length P) and completion ids c (length C), the model reads
p + c[:-1]; the logits at positions P-1 .. P+C-2 give exactly one prediction per completion token,
the final token included. Only positions whose value mask is 1 count (forced schema tokens carry no
loss). A token's log-prob is the full-vocabulary log-softmax at temperature 1 with no grammar mask;
the sequence log-prob is their sum, divided by the number of value tokens when `normalize`.

The LM head runs only on the selected positions, so a long prompt never materialises a
(length x vocabulary) logits tensor. `shared_prompt_value_logprobs` gives the same values for several
completions of one prompt with the prompt computed once: a prompt forward, then the completions packed into
one sequence over its key/value cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from travel.agents.models import is_activation_checkpointing
from travel.algorithms.core.packed_attention import PACKED_PROMPT_TOKENS
from travel.generation.model_io import cache_argument, model_device, new_cache

IdSequence = Sequence[int] | torch.Tensor
NON_FINITE_LOSS = 0.1  # what a NaN/Inf loss is replaced by (a constant: no gradient reaches the model)


def _as_ids(values: IdSequence, device: torch.device) -> torch.Tensor:
    tensor = values if isinstance(values, torch.Tensor) else torch.tensor(list(values), dtype=torch.long)
    return tensor.reshape(-1).to(device=device, dtype=torch.long)


def _as_mask(values: IdSequence, device: torch.device) -> torch.Tensor:
    tensor = values if isinstance(values, torch.Tensor) else torch.tensor([bool(v) for v in values])
    return tensor.reshape(-1).to(device=device, dtype=torch.bool)


def _backbone_and_head(model: Any) -> tuple[Any, Any] | None:
    """(decoder stack, LM head) of a transformers causal LM, or None when the split is unknown."""
    prefix = getattr(model, "base_model_prefix", None)
    backbone = getattr(model, prefix, None) if prefix else None
    get_head = getattr(model, "get_output_embeddings", None)
    head = get_head() if callable(get_head) else None
    if backbone is None or head is None or backbone is model:
        return None
    return backbone, head


def _selected_logits(
    model: Any,
    input_ids: torch.Tensor,
    attention: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor,
    position_ids: torch.Tensor | None = None,
    prompt_tokens: int | None = None,
) -> torch.Tensor:
    """(N, vocab) float32 logits at the (row, col) positions; `prompt_tokens`: the packed sequence's first tokens
    are a prompt attending causally to itself alone (travel/algorithms/core/packed_attention.py)."""
    inputs = {"input_ids": input_ids, "attention_mask": attention, "use_cache": False}
    if position_ids is not None:
        inputs["position_ids"] = position_ids
    if prompt_tokens is not None:
        inputs[PACKED_PROMPT_TOKENS] = prompt_tokens
    split = _backbone_and_head(model)
    if split is None:
        logits = model(**inputs).logits
        return logits[rows, cols].float()
    backbone, head = split
    hidden = backbone(**inputs).last_hidden_state
    return head(hidden[rows, cols]).float()


def prompt_cache_usable(model: Any) -> bool:
    """Whether a forward can hand its key/value cache to the next with gradients: a transformers model whose
    gradient checkpointing is off (checkpointed layers drop the cache)."""

    return hasattr(model, "config") and not is_activation_checkpointing(model)


def _selected_logits_over_prompt_cache(
    model: Any,
    prompt_ids: torch.Tensor,
    packed_ids: torch.Tensor,
    attention: torch.Tensor,
    position_ids: torch.Tensor,
    cols: torch.Tensor,
) -> torch.Tensor:
    """(N, vocab) float32 logits at positions `cols` of prompt + packed, from a prompt forward and a forward of the
    packed tokens over its cache (`attention`: the packed rows of the additive mask over prompt + packed)."""
    split = _backbone_and_head(model)
    net, head = (model, None) if split is None else split
    cache_name, cache = cache_argument(net), new_cache(model)
    first = net(input_ids=prompt_ids, use_cache=True, **{cache_name: cache})
    second = net(input_ids=packed_ids, attention_mask=attention, position_ids=position_ids, use_cache=True, **{cache_name: cache})
    if head is None:
        return torch.cat([first.logits, second.logits], dim=1)[0, cols].float()
    hidden = torch.cat([first.last_hidden_state, second.last_hidden_state], dim=1)[0, cols]
    return head(hidden).float()


def _checked(model: Any, prompt_ids, completion_ids, value_mask):
    """(device, prompts, completions, masks, counts) as tensors on the model's device, with clear errors."""
    if not (len(prompt_ids) == len(completion_ids) == len(value_mask)):
        raise ValueError(
            f"got {len(prompt_ids)} prompts, {len(completion_ids)} completions and {len(value_mask)} value masks"
        )
    device = model_device(model)
    prompts = [_as_ids(p, device) for p in prompt_ids]
    completions = [_as_ids(c, device) for c in completion_ids]
    masks = [_as_mask(m, device) for m in value_mask]
    for index, (prompt, completion, mask) in enumerate(zip(prompts, completions, masks)):
        if len(completion) != len(mask):
            raise ValueError(
                f"sequence {index}: the value mask has {len(mask)} entries but the completion has {len(completion)} tokens"
            )
        if len(prompt) == 0:
            raise ValueError(f"sequence {index}: the prompt is empty; the first completion token needs a prediction")
    counts = torch.stack([mask.sum() for mask in masks]) if masks else torch.zeros(0, dtype=torch.long, device=device)
    return device, prompts, completions, masks, counts


def _finish(sums, counts, normalize: bool, return_counts: bool):
    result = sums / counts.clamp(min=1).to(sums.dtype) if normalize else sums
    return (result, counts) if return_counts else result


def value_token_logprobs(
    model: Any,
    prompt_ids: Sequence[IdSequence],
    completion_ids: Sequence[IdSequence],
    value_mask: Sequence[IdSequence],
    *,
    normalize: bool = True,
    return_counts: bool = False,
    pad_token_id: int = 0,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """(B,) masked value-token log-probs of B sequences (right-padded into one forward), with gradients.

    A sequence with no value token gets 0 (and count 0). With `return_counts`, also the (B,) counts.
    """
    device, prompts, completions, masks, counts = _checked(model, prompt_ids, completion_ids, value_mask)
    batch = len(prompts)
    sums = torch.zeros(batch, dtype=torch.float32, device=device)
    scored = [i for i in range(batch) if int(counts[i]) > 0]
    if scored:
        inputs = [torch.cat([prompts[i], completions[i][:-1]]) for i in scored]
        width = max(len(ids) for ids in inputs)
        input_ids = torch.full((len(scored), width), pad_token_id, dtype=torch.long, device=device)
        attention = torch.zeros((len(scored), width), dtype=torch.long, device=device)
        rows, cols, targets, owners = [], [], [], []
        for row, (i, ids) in enumerate(zip(scored, inputs)):
            input_ids[row, : len(ids)] = ids
            attention[row, : len(ids)] = 1
            positions = torch.nonzero(masks[i], as_tuple=False).reshape(-1)
            rows.append(torch.full_like(positions, row))
            cols.append(positions + len(prompts[i]) - 1)
            targets.append(completions[i][positions])
            owners.append(torch.full_like(positions, i))
        rows_t, cols_t = torch.cat(rows), torch.cat(cols)
        logits = _selected_logits(model, input_ids, attention, rows_t, cols_t)
        token_logprobs = torch.log_softmax(logits, dim=-1).gather(1, torch.cat(targets)[:, None]).squeeze(1)
        sums = sums.index_add(0, torch.cat(owners), token_logprobs)
    return _finish(sums, counts, normalize, return_counts)


PACKABLE_ATTENTION = ("sdpa", "eager")  # implementations that take a custom 4-D additive mask


def shared_prompt_value_logprobs(
    model: Any,
    prompt_ids: IdSequence,
    completion_ids: Sequence[IdSequence],
    value_mask: Sequence[IdSequence],
    *,
    normalize: bool = True,
    return_counts: bool = False,
    packed: bool = True,
    split_prompt: bool = True,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """`value_token_logprobs` for B completions of one prompt, with the prompt computed once.

    The prompt runs alone (causal attention: the fused kernels), then each scored completion's inputs c[:-1]
    run packed into one sequence over the prompt's key/value cache, whose tensors keep their gradients. A mask
    lets each completion attend to the prompt and to its own earlier tokens only, and its position ids continue
    from the prompt's, so every prediction sees exactly what it would see alone; the prompt's last position
    predicts every completion's first token. A K-candidate group with a long prompt costs one prompt forward
    instead of K, and no (prompt + completions)^2 mask. With activation checkpointing (which drops the cache)
    prompt and completions run as one packed sequence under one mask, whose attention runs the prompt's rows as
    plain causal attention over the prompt (travel/algorithms/core/packed_attention.py; `split_prompt=False` runs
    the whole square under the mask, for comparison); with `packed=False`, and for models whose attention
    cannot take a custom mask, the completions run as B separate padded sequences (`value_token_logprobs`).
    """
    if not packed or getattr(getattr(model, "config", None), "_attn_implementation", "sdpa") not in PACKABLE_ATTENTION:
        return value_token_logprobs(
            model, [prompt_ids] * len(completion_ids), completion_ids, value_mask,
            normalize=normalize, return_counts=return_counts,
        )
    device, prompts, completions, masks, counts = _checked(model, [prompt_ids] * len(completion_ids), completion_ids, value_mask)
    sums = torch.zeros(len(completions), dtype=torch.float32, device=device)
    scored = [i for i in range(len(completions)) if int(counts[i]) > 0]
    if scored:
        prompt = prompts[0]
        length = len(prompt)
        pieces, positions, segments, cols, targets, owners = [prompt], [torch.arange(length, device=device)], [], [], [], []
        segments.append(torch.full((length,), -1, device=device))
        offset = length
        for segment, i in enumerate(scored):
            inputs = completions[i][:-1]
            pieces.append(inputs)
            positions.append(torch.arange(length, length + len(inputs), device=device))
            segments.append(torch.full((len(inputs),), segment, device=device))
            picked = torch.nonzero(masks[i], as_tuple=False).reshape(-1)
            # token t is predicted after c[t-1], packed at offset + t - 1; token 0 after the prompt's last token
            cols.append(torch.where(picked == 0, length - 1, offset + picked - 1))
            targets.append(completions[i][picked])
            owners.append(torch.full_like(picked, i))
            offset += len(inputs)
        # over the prompt's cache the prompt runs alone (causal: a fused attention kernel) and only the completions'
        # rows of the mask exist; gradients reach the prompt through the cache
        over_cache = prompt_cache_usable(model)
        first_row = length if over_cache else 0
        segment = torch.cat(segments)
        index = torch.arange(offset, device=device)
        allowed = (index[None, :] <= index[first_row:, None]) & (
            (segment[None, :] == -1) | (segment[None, :] == segment[first_row:, None])
        )
        dtype = _dtype(model)
        attention = torch.zeros((1, 1, offset - first_row, offset), dtype=dtype, device=device)
        attention.masked_fill_(~allowed[None, None], torch.finfo(dtype).min)
        cols_t = torch.cat(cols)
        if over_cache:
            logits = _selected_logits_over_prompt_cache(
                model, prompt[None], torch.cat(pieces[1:])[None], attention, torch.cat(positions[1:])[None], cols_t
            )
        else:
            logits = _selected_logits(
                model, torch.cat(pieces)[None], attention, torch.zeros_like(cols_t), cols_t,
                position_ids=torch.cat(positions)[None], prompt_tokens=length if split_prompt else None,
            )
        token_logprobs = torch.log_softmax(logits, dim=-1).gather(1, torch.cat(targets)[:, None]).squeeze(1)
        sums = sums.index_add(0, torch.cat(owners), token_logprobs)
    return _finish(sums, counts, normalize, return_counts)


def _dtype(model: Any) -> torch.dtype:
    try:
        return next(model.parameters()).dtype
    except (StopIteration, AttributeError):
        return torch.float32


def advantage_weighted_loss(
    logprobs: torch.Tensor,
    advantages: torch.Tensor | Sequence[float],
    token_counts: torch.Tensor | Sequence[int] | None = None,
) -> torch.Tensor:
    """MAGRPO loss: mean of -logp * advantage over sequences with >= 1 value token.

    Without `token_counts` every sequence counts. No counted sequence: 0 (still attached to the graph).
    A NaN/Inf result becomes the constant NON_FINITE_LOSS, which backpropagates nothing.
    """
    advantages = torch.as_tensor(advantages, dtype=logprobs.dtype, device=logprobs.device).reshape(-1)
    if advantages.shape != logprobs.reshape(-1).shape:
        raise ValueError(f"got {advantages.numel()} advantages for {logprobs.numel()} log-probs")
    logprobs = logprobs.reshape(-1)
    if token_counts is None:
        keep = torch.ones_like(logprobs, dtype=torch.bool)
    else:
        keep = torch.as_tensor(token_counts, device=logprobs.device).reshape(-1) > 0
        if keep.shape != logprobs.shape:
            raise ValueError(f"got {keep.numel()} token counts for {logprobs.numel()} log-probs")
    if not bool(keep.any()):
        loss = (logprobs * 0.0).sum()
    else:
        loss = -(logprobs[keep] * advantages[keep]).mean()
    if not bool(torch.isfinite(loss)):
        return torch.tensor(NON_FINITE_LOSS, dtype=logprobs.dtype, device=logprobs.device, requires_grad=True)
    return loss
