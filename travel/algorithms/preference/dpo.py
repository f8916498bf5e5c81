"""The joint, reference-free DPO objective of MADPO and its streamed update.

For a pair with winner w and loser l, each role r contributes delta_r = logp_r(w) - logp_r(l), where logp is
the masked, length-normalised value-token log-probability of that role's generated continuation (schema
tokens carry no loss, the final token is included; travel.algorithms.core.losses). The loss of a batch is

    mean over pairs of -log sigmoid(beta * sum_r delta_r)        (beta = algorithm.dpo_beta, 0.1)

with no reference policy. The update never holds more than one winner/loser graph: the deltas are first
computed without gradients, giving each pair the coefficient

    c = -beta * sigmoid(-beta * sum_r delta_r) / |batch|

(the loss's derivative with respect to that pair's delta, for every role); then each role backpropagates
c * (logp(w) - logp(l)) one pair at a time and steps its own optimizer. A single policy (the joint actor) needs
no pass without gradients: its pair's coefficient depends on that pair's own delta alone, which the forward
with gradients gives just before its backward. A pair's winner and loser share their role's prompt, so by
default they run as one packed sequence that carries the prompt once
(`travel.algorithms.core.losses.shared_prompt_value_logprobs`). The accumulated gradient is
exactly the full loss's gradient, provided the forward passes are deterministic: the models must have no
active dropout, which `check_zero_dropout` enforces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch
from torch import nn

from travel.generation.model_io import model_device

if TYPE_CHECKING:
    from travel.algorithms.preference.batch import PreferenceBatch

DEFAULT_BETA = 0.1
# config attributes that name a dropout probability (transformers conventions)
DROPOUT_CONFIG_SUFFIXES = ("dropout", "pdrop", "dropout_prob", "dropout_rate")

# (model, prompt ids, continuation ids, 0/1 value mask, device) -> 0-dim normalised log-prob with grad
SequenceLogprob = Callable[[Any, Sequence[int], Sequence[int], Sequence[int], torch.device], torch.Tensor]
# (model, prompt ids, continuations' ids, their 0/1 value masks) -> (n,) normalised log-probs with grad
GroupLogprob = Callable[[Any, Sequence[int], Sequence[Sequence[int]], Sequence[Sequence[int]]], torch.Tensor]


class DropoutError(ValueError):
    """A model with active dropout: the streamed DPO gradient needs deterministic forward passes."""


def check_zero_dropout(model: nn.Module, where: str) -> None:
    """Refuse a model whose config or modules have a dropout probability above 0."""
    config = getattr(model, "config", None)
    active = []
    if config is not None:
        for key, value in sorted(vars(config).items()):
            if key.endswith(DROPOUT_CONFIG_SUFFIXES) and isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                active.append(f"config.{key}={value}")
    for name, module in model.named_modules():
        if isinstance(module, nn.modules.dropout._DropoutNd) and module.p > 0:
            active.append(f"module {name or type(module).__name__} p={module.p}")
    if active:
        raise DropoutError(
            f"{where}: joint DPO evaluates one winner/loser graph at a time and needs deterministic forward "
            f"passes, but the model has active dropout ({', '.join(active[:4])}); load it with dropout 0"
        )


# ---- the objective --------------------------------------------------------------------------------------


def joint_dpo_loss(deltas: torch.Tensor, beta: float = DEFAULT_BETA) -> torch.Tensor:
    """The batch loss from a (pairs, roles) tensor of log-prob differences winner - loser."""
    if deltas.dim() != 2 or deltas.shape[0] == 0:
        raise ValueError(f"deltas must be a non-empty (pairs, roles) tensor, got shape {tuple(deltas.shape)}")
    return -torch.nn.functional.logsigmoid(beta * deltas.sum(dim=1)).mean()


def pair_coefficients(joint_deltas: Sequence[float], beta: float = DEFAULT_BETA) -> list[float]:
    """d loss / d delta for each pair (the same for every role): -beta * sigmoid(-beta * delta) / |batch|."""
    size = len(joint_deltas)
    if size == 0:
        raise ValueError("no pairs to compute DPO coefficients for")
    return [pair_coefficient(delta, size, beta) for delta in joint_deltas]


def pair_coefficient(joint_delta: float, batch_size: int, beta: float = DEFAULT_BETA) -> float:
    """One pair's d loss / d delta in a batch of `batch_size` pairs."""
    return -beta * _sigmoid(-beta * float(joint_delta)) / batch_size


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def joint_loss_value(joint_deltas: Sequence[float], beta: float = DEFAULT_BETA) -> float:
    """The batch loss from each pair's summed delta (no graph)."""
    return math.fsum(_softplus(-beta * float(d)) for d in joint_deltas) / len(joint_deltas)


def _softplus(x: float) -> float:
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


# ---- per-role passes ------------------------------------------------------------------------------------


def packed_logprobs(model: Any, prompt_ids: Sequence[int], ids: Sequence[Sequence[int]], masks: Sequence[Sequence[int]]) -> torch.Tensor:
    """The default: the continuations packed behind one copy of the prompt."""
    # deferred: the losses load transformers; a dry run imports this module without them
    from travel.algorithms.core.losses import shared_prompt_value_logprobs

    return shared_prompt_value_logprobs(model, prompt_ids, ids, masks)


def one_by_one(logprob: SequenceLogprob) -> GroupLogprob:
    """A per-sequence log-prob used as a group one: each continuation runs as its own sequence."""

    def group(model: Any, prompt_ids: Sequence[int], ids: Sequence[Sequence[int]], masks: Sequence[Sequence[int]]) -> torch.Tensor:
        device = model_device(model)
        return torch.stack([torch.as_tensor(logprob(model, prompt_ids, i, m, device)) for i, m in zip(ids, masks)])

    return group


def _pair_logprobs(model: Any, batch: "PreferenceBatch", pair: Any, role: int, logprob: GroupLogprob) -> torch.Tensor:
    winner, loser = pair.winner.sequences[role], pair.loser.sequences[role]
    return logprob(model, batch.prompt_ids(pair, role), [winner.ids, loser.ids], [winner.mask, loser.mask])


def role_logprobs(
    model: Any, batch: "PreferenceBatch", role: int, logprob: GroupLogprob = packed_logprobs
) -> list[tuple[float, float]]:
    """(logp(winner), logp(loser)) of one role for every pair, without gradients."""
    out = []
    with torch.no_grad():
        for pair in batch:
            winner, loser = _pair_logprobs(model, batch, pair, role, logprob).tolist()
            out.append((float(winner), float(loser)))
    return out


def accumulate_single_policy_gradients(
    model: Any, batch: "PreferenceBatch", beta: float = DEFAULT_BETA, logprob: GroupLogprob = packed_logprobs
) -> list[float]:
    """The single policy's whole DPO gradient in one pass: per pair, the forward with gradients gives the delta,
    hence the coefficient, then its backward. Returns each pair's delta (before the update)."""
    deltas = []
    for pair in batch:
        winner, loser = _pair_logprobs(model, batch, pair, 0, logprob)
        deltas.append(float(winner.detach()) - float(loser.detach()))  # as the pass without gradients takes it
        delta = winner - loser
        if delta.requires_grad:  # sequences without value tokens have log-prob 0 and no graph
            (pair_coefficient(deltas[-1], len(batch), beta) * delta).backward()
    return deltas


def accumulate_role_gradients(
    model: Any,
    batch: "PreferenceBatch",
    role: int,
    coefficients: Sequence[float],
    logprob: GroupLogprob = packed_logprobs,
) -> None:
    """Add this role's share of the joint DPO gradient to `model`'s .grad, one winner/loser graph at a time."""
    if len(coefficients) != len(batch):
        raise ValueError(f"{len(coefficients)} coefficients for {len(batch)} pairs")
    for pair, coefficient in zip(batch, coefficients):
        winner, loser = _pair_logprobs(model, batch, pair, role, logprob)
        delta = coefficient * (winner - loser)
        if delta.requires_grad:  # sequences without value tokens have log-prob 0 and no graph
            delta.backward()


# ---- the update -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DPOStep:
    loss: float  # the batch loss before the update
    pairs: int
    mean_joint_delta: float
    preference_accuracy: float  # fraction of pairs with sum delta > 0 before the update
    role_deltas: tuple[float, ...]  # mean delta per role
    grad_norms: tuple[float, ...] = ()  # per role: the L2 norm of the accumulated gradient before the step


def joint_dpo_update(
    actors: Any,
    batch: "PreferenceBatch",
    beta: float = DEFAULT_BETA,
    logprob: GroupLogprob = packed_logprobs,
) -> DPOStep:
    """One optimizer step per role on the joint DPO loss of `batch` (streamed, see the module docstring).

    `actors` has `.actors` (each with agent_id, model and optimizer) and `update_each(step)`, which runs
    `step(actor)` for every actor with the others parked on the CPU when the hardware config says so.
    """
    if len(batch) == 0:
        raise ValueError("joint DPO needs at least one pair")
    for actor in actors.actors:
        check_zero_dropout(actor.model, f"agent {actor.agent_id}")

    def step(actor: Any, accumulate: Callable[[Any], Any]) -> tuple[Any, float]:
        """`accumulate(model)` fills the gradient; then the norm is taken and the optimizer steps."""
        actor.model.train()
        actor.optimizer.zero_grad(set_to_none=True)
        try:
            out = accumulate(actor.model)
            gradients = [p.grad for p in actor.model.parameters() if p.grad is not None]
            grad_norm = float(torch.nn.utils.get_total_norm(gradients)) if gradients else 0.0
            actor.optimizer.step()
        finally:
            actor.optimizer.zero_grad(set_to_none=True)
            actor.model.eval()
        return out, grad_norm

    if len(actors.actors) == 1:  # one pass: the pair's own delta gives its coefficient
        ((deltas_0, grad_norm),) = actors.update_each(
            lambda actor: step(actor, lambda model: accumulate_single_policy_gradients(model, batch, beta, logprob))
        )
        deltas, grad_norms, joint = [deltas_0], [grad_norm], deltas_0
    else:

        def detached(actor: Any) -> list[tuple[float, float]]:
            actor.model.train()
            return role_logprobs(actor.model, batch, actor.agent_id, logprob)

        per_role = actors.update_each(detached)
        deltas = [[w - l for w, l in role] for role in per_role]  # roles x pairs
        joint = [math.fsum(column) for column in zip(*deltas)]
        coefficients = pair_coefficients(joint, beta)
        stepped = actors.update_each(
            lambda actor: step(
                actor, lambda model: accumulate_role_gradients(model, batch, actor.agent_id, coefficients, logprob)
            )
        )
        grad_norms = [norm for _, norm in stepped]
    return DPOStep(
        loss=joint_loss_value(joint, beta),
        pairs=len(batch),
        mean_joint_delta=math.fsum(joint) / len(joint),
        preference_accuracy=sum(d > 0 for d in joint) / len(joint),
        role_deltas=tuple(math.fsum(role) / len(role) for role in deltas),
        grad_norms=tuple(grad_norms),
    )
