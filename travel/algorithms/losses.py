"""Value-token log-probabilities with gradients, and the MAGRPO advantage-weighted loss (REFERENCE.md 7.5).

For a sequence with prompt ids p (length P) and completion ids c (length C), the model reads
p + c[:-1]; the logits at positions P-1 .. P+C-2 give exactly one prediction per completion token,
the final token included. Only positions whose value mask is 1 count (forced schema tokens carry no
loss). A token's log-prob is the full-vocabulary log-softmax at temperature 1 with no grammar mask;
the sequence log-prob is their sum, divided by the number of value tokens when `normalize`.

The LM head runs only on the selected positions, so a long prompt never materialises a
(length x vocabulary) logits tensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

IdSequence = Sequence[int] | torch.Tensor
NON_FINITE_LOSS = 0.1  # what a NaN/Inf loss is replaced by (a constant: no gradient reaches the model)


def _as_ids(values: IdSequence, device: torch.device) -> torch.Tensor:
    tensor = values if isinstance(values, torch.Tensor) else torch.tensor(list(values), dtype=torch.long)
    return tensor.reshape(-1).to(device=device, dtype=torch.long)


def _as_mask(values: IdSequence, device: torch.device) -> torch.Tensor:
    tensor = values if isinstance(values, torch.Tensor) else torch.tensor([bool(v) for v in values])
    return tensor.reshape(-1).to(device=device, dtype=torch.bool)


def _device(model: Any) -> torch.device:
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        return torch.device("cpu")


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
    model: Any, input_ids: torch.Tensor, attention: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor
) -> torch.Tensor:
    """(N, vocab) float32 logits at the (row, col) positions."""
    split = _backbone_and_head(model)
    if split is None:
        logits = model(input_ids=input_ids, attention_mask=attention, use_cache=False).logits
        return logits[rows, cols].float()
    backbone, head = split
    hidden = backbone(input_ids=input_ids, attention_mask=attention, use_cache=False).last_hidden_state
    return head(hidden[rows, cols]).float()


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
    if not (len(prompt_ids) == len(completion_ids) == len(value_mask)):
        raise ValueError(
            f"got {len(prompt_ids)} prompts, {len(completion_ids)} completions and {len(value_mask)} value masks"
        )
    device = _device(model)
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
    batch = len(prompts)
    counts = torch.stack([mask.sum() for mask in masks]) if batch else torch.zeros(0, dtype=torch.long, device=device)
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
    result = sums / counts.clamp(min=1).to(sums.dtype) if normalize else sums
    return (result, counts) if return_counts else result


def sequence_value_logprob(
    model: Any,
    prompt_ids: IdSequence,
    completion_ids: IdSequence,
    value_mask: IdSequence,
    device: torch.device | str | None = None,
    normalize: bool = True,
) -> torch.Tensor:
    """The 0-d value-token log-prob of one sequence (`device` is accepted for callers; the model's is used)."""
    return value_token_logprobs(model, [prompt_ids], [completion_ids], [value_mask], normalize=normalize)[0]


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
