"""The MARLHF reward model: a decoder backbone with a scalar head, its joint input text, and Bradley-Terry fitting.

The backbone is the base model without its LM head (no vocabulary logits); `Linear(hidden, 1)` reads the
hidden state at the last attended position. One input text describes one joint action:
`{"joint_actions": [logistics_action, experience_action], "role_contexts": [prompt_0, prompt_1]}` as JSON
(non-ASCII kept), each role context being that role's rendered prompt without the trailing assistant
prefill (the action text already starts with it). Texts are tokenized one at a time, never truncated, and
refused above `max_length` tokens.

Fitting minimises -log sigmoid(s_winner - s_loser) averaged over each batch, with AdamW over the trainable
parameters. Afterwards the optimizer is released and the model frozen (eval, no grad): it then only scores
online joint actions. Its scores have no fixed scale; they are never used for evaluation.
"""

from __future__ import annotations

import gc
import json
import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch import nn

from travel.agents.models import resolve_dtype
from travel.task.fields import JOINT_ACTION
from travel.task.roles import assistant_prefill


class RewardModelError(ValueError):
    """An input or option the reward model cannot use; the message names it."""


# ---- the joint input text -----------------------------------------------------------------------------


def role_context(prompt: str, agent_id: int) -> str:
    """The role's rendered prompt without the trailing assistant prefill (kept once, in the action text)."""
    prefill = assistant_prefill(agent_id)
    return prompt[: -len(prefill)] if prompt.endswith(prefill) else prompt


def joint_text(actions: Sequence[str], prompts: Sequence[str]) -> str:
    """The reward model's input for one joint action: both role actions, then the policies' contexts (both role
    prompts, or the joint actor's one prompt)."""
    if len(actions) != 2 or len(prompts) not in (1, 2):
        raise RewardModelError(
            f"a joint input needs 2 actions and 2 role prompts (1 joint prompt), got {len(actions)} and {len(prompts)}"
        )
    agent_ids = [JOINT_ACTION] if len(prompts) == 1 else range(2)
    contexts = [role_context(str(prompt), agent_id) for agent_id, prompt in zip(agent_ids, prompts)]
    return json.dumps({"joint_actions": [str(a) for a in actions], "role_contexts": contexts}, ensure_ascii=False)


# ---- the model ----------------------------------------------------------------------------------------


def decoder_backbone(model: nn.Module) -> nn.Module:
    """The base decoder of a causal LM (its `base_model`), or the model itself when it has no LM head."""
    base = getattr(model, "base_model", None)
    if isinstance(base, nn.Module) and base is not model:
        return base
    if hasattr(model, "lm_head"):
        raise RewardModelError(f"{type(model).__name__} has an LM head but no separate base model to score with")
    return model


def hidden_size(backbone: nn.Module) -> int:
    config = getattr(backbone, "config", None)
    size = getattr(config, "hidden_size", None)
    if not isinstance(size, int) or size < 1:
        raise RewardModelError(f"{type(backbone).__name__}: its config has no hidden_size for the scalar head")
    return size


def last_attended_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """Per row, the index of the last position whose mask is 1 (left or right padding)."""
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    return torch.where(attention_mask.bool(), positions, torch.full_like(positions, -1)).max(dim=1).values


class JointRewardModel(nn.Module):
    """Scalar scores of joint actions: backbone hidden state at the last attended position -> Linear(hidden, 1)."""

    def __init__(self, backbone: nn.Module, tokenizer: Any, *, max_length: int, freeze_backbone: bool = False):
        super().__init__()
        if max_length < 1:
            raise RewardModelError(f"algorithm.reward_max_length={max_length}: must be >= 1")
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        self.head = nn.Linear(hidden_size(backbone), 1)
        self.freeze_backbone = bool(freeze_backbone)
        if self.freeze_backbone:
            self.backbone.requires_grad_(False)

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    def trainable_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]

    def encode(self, text: str) -> list[int]:
        """Token ids of one input, never truncated; longer than `max_length` is refused."""
        ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        if not ids:
            raise RewardModelError("a reward-model input tokenized to zero tokens")
        if len(ids) > self.max_length:
            raise RewardModelError(
                f"a reward-model input has {len(ids)} tokens, above algorithm.reward_max_length={self.max_length}; "
                f"inputs are never truncated (raise the limit or shorten the prompts)"
            )
        return ids

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.score_pooled(self.pooled(input_ids, attention_mask))

    def pooled(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(rows, hidden) backbone hidden states at each row's last attended position, in the head's dtype."""
        output = self.backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        hidden = output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0]
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        return hidden[rows, last_attended_index(attention_mask).to(hidden.device)].to(self.head.weight.dtype)

    def score_pooled(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.head(pooled).squeeze(-1)

    def pooled_text(self, text: str) -> torch.Tensor:
        """(hidden,) the pooled hidden state of one input text."""
        ids = torch.tensor([self.encode(text)], dtype=torch.long, device=self.device)
        return self.pooled(ids, torch.ones_like(ids))[0]

    def score_text(self, text: str) -> torch.Tensor:
        """The scalar score of one input text (a 0-dim tensor; differentiable unless frozen)."""
        return self.score_pooled(self.pooled_text(text))

    @torch.no_grad()
    def score_texts(self, texts: Sequence[str]) -> list[float]:
        was_training = self.training
        self.eval()
        try:
            return [float(self.score_text(text)) for text in texts]
        finally:
            self.train(was_training)

    def freeze(self) -> "JointRewardModel":
        self.eval()
        self.requires_grad_(False)
        return self


# ---- fitting ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreferenceText:
    """One labelled comparison as reward-model inputs."""

    winner: str
    loser: str


@dataclass(frozen=True)
class RewardFitSettings:
    learning_rate: float = 1e-5
    num_epochs: int = 1
    batch_size: int = 1
    seed: int = 0

    def __post_init__(self):
        if not self.learning_rate > 0:
            raise RewardModelError(f"algorithm.reward_learning_rate={self.learning_rate}: must be > 0")
        if self.num_epochs < 1:
            raise RewardModelError(f"algorithm.reward_num_train_epochs={self.num_epochs}: must be >= 1")
        if self.batch_size < 1:
            raise RewardModelError(f"algorithm.reward_train_batch_size={self.batch_size}: must be >= 1")


@dataclass(frozen=True)
class RewardFitResult:
    updates: int
    pairs: int
    mean_loss: float
    train_accuracy: float  # fraction of pairs ranked correctly by the scores each update was computed from


def bradley_terry_loss(winner_scores: torch.Tensor, loser_scores: torch.Tensor) -> torch.Tensor:
    return -torch.nn.functional.logsigmoid(winner_scores - loser_scores).mean()


def fit_reward_model(model: JointRewardModel, comparisons: Sequence[PreferenceText], settings: RewardFitSettings) -> RewardFitResult:
    """Bradley-Terry fitting over shuffled batches; then the optimizer is released and the model frozen."""
    if not comparisons:
        raise RewardModelError("no preference pairs to fit the reward model on")
    parameters = model.trainable_parameters()
    if not parameters:
        raise RewardModelError("the reward model has no trainable parameters")
    optimizer = torch.optim.AdamW(parameters, lr=settings.learning_rate)
    rng = random.Random(settings.seed)
    losses: list[float] = []
    updates = correct = 0
    model.train()
    try:
        score = model.score_text
        if model.freeze_backbone:  # only the head learns: each text's pooled state is computed once, not every epoch
            with torch.no_grad():
                texts = dict.fromkeys(text for c in comparisons for text in (c.winner, c.loser))
                pooled = {text: model.pooled_text(text) for text in texts}
            score = lambda text: model.score_pooled(pooled[text])  # noqa: E731
        for _ in range(settings.num_epochs):
            order = list(range(len(comparisons)))
            rng.shuffle(order)
            for start in range(0, len(order), settings.batch_size):
                batch = [comparisons[i] for i in order[start : start + settings.batch_size]]
                optimizer.zero_grad(set_to_none=True)
                winners = torch.stack([score(c.winner) for c in batch])
                losers = torch.stack([score(c.loser) for c in batch])
                loss = bradley_terry_loss(winners, losers)
                loss.backward()
                optimizer.step()
                losses.append(float(loss.detach()))
                correct += int((winners.detach() > losers.detach()).sum())
                updates += 1
    finally:
        optimizer.zero_grad(set_to_none=True)
        del optimizer
        release_memory(model.device)
        model.freeze()
    seen = settings.num_epochs * len(comparisons)
    return RewardFitResult(updates, len(comparisons), math.fsum(losses) / len(losses), correct / seen)


def release_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


# ---- building -----------------------------------------------------------------------------------------


def build_reward_model(
    load_base: Callable[[], tuple[nn.Module, Any]],
    *,
    device: str | torch.device,
    max_length: int,
    freeze_backbone: bool = False,
    gradient_checkpointing: bool = False,
    seed: int = 0,
) -> JointRewardModel:
    """A fresh reward model: `load_base()` gives (model, tokenizer) on the CPU, from the base weights.

    The head's initial weights come from `seed`, so a refit in a later iteration starts from the same point.
    """
    model, tokenizer = load_base()
    backbone = decoder_backbone(model)
    if gradient_checkpointing and not freeze_backbone and hasattr(backbone, "gradient_checkpointing_enable"):
        backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        reward_model = JointRewardModel(backbone, tokenizer, max_length=max_length, freeze_backbone=freeze_backbone)
    del model
    return reward_model.to(torch.device(device))


def load_pretrained_base(name: str, dtype: str = "auto", attn_implementation: str = "sdpa") -> tuple[nn.Module, Any]:
    """A hub id or local directory as (decoder without LM head, tokenizer), on the CPU, in the dtype its weights
    were saved in unless `dtype` names one (the paper's reward model: bfloat16)."""
    from transformers import AutoModel, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = AutoModel.from_pretrained(
            name, dtype=dtype if dtype == "auto" else resolve_dtype(dtype), attn_implementation=attn_implementation
        )
    except (OSError, ValueError) as exc:
        raise RewardModelError(f"algorithm.reward_model_name={name!r}: could not load it ({type(exc).__name__}: {exc})") from exc
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer
