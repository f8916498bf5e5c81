"""The reward model's joint input, scalar head, Bradley-Terry fitting and length limit, on a tiny random decoder."""

import json

import pytest
import torch

from travel.agents.models import build_tiny_random
from travel.algorithms.preference.reward_model import (
    JointRewardModel,
    PreferenceText,
    RewardFitSettings,
    RewardModelError,
    bradley_terry_loss,
    build_reward_model,
    fit_reward_model,
    joint_text,
    last_attended_index,
    load_pretrained_base,
    role_context,
)
from travel.task.roles import assistant_prefill

torch.set_num_threads(1)  # tiny models: thread start-up costs more than the matmuls on a shared 2-core machine

ACTION_0 = assistant_prefill(0) + 'from Alpha to Beta"}, {"day": 1, "field": "transportation", "value": "F100"}]}'
ACTION_1 = assistant_prefill(1) + 'Café \\"Nord\\""}]}'
PROMPT_0 = "<|im_start|>user\nplan logistics {\"nested\": [1, 2]}<|im_end|>\n<|im_start|>assistant\n"
PROMPT_1 = "<|im_start|>user\nplan the days — ünïcode<|im_end|>\n<|im_start|>assistant\n"


def tiny_base():
    loaded = build_tiny_random(seed=3)
    return loaded.model, loaded.tokenizer


def tiny_reward_model(max_length=4096, **kwargs):
    return build_reward_model(tiny_base, device="cpu", max_length=max_length, seed=5, **kwargs)


def test_joint_text_holds_both_actions_then_both_role_contexts_without_the_prefill():
    text = joint_text([ACTION_0, ACTION_1], [PROMPT_0 + assistant_prefill(0), PROMPT_1 + assistant_prefill(1)])
    decoded = json.loads(text)
    assert list(decoded) == ["joint_actions", "role_contexts"]
    assert decoded["joint_actions"] == [ACTION_0, ACTION_1]
    assert decoded["role_contexts"] == [PROMPT_0, PROMPT_1]
    assert "ünïcode" in text and "Café" in text  # non-ASCII kept, not escaped


def test_joint_text_is_the_same_with_or_without_the_trailing_prefill():
    with_prefill = joint_text([ACTION_0, ACTION_1], [PROMPT_0 + assistant_prefill(0), PROMPT_1 + assistant_prefill(1)])
    without = joint_text([ACTION_0, ACTION_1], [PROMPT_0, PROMPT_1])
    assert with_prefill == without
    # only a trailing prefill of that role is removed: agent 1's prefill on agent 0's prompt stays
    assert role_context(PROMPT_0 + assistant_prefill(1), 0) == PROMPT_0 + assistant_prefill(1)


def test_joint_text_needs_two_actions_and_two_prompts():
    with pytest.raises(RewardModelError, match="2 actions and 2 role prompts"):
        joint_text([ACTION_0], [PROMPT_0, PROMPT_1])


def test_the_backbone_has_no_lm_head_and_the_head_maps_hidden_to_one_score():
    model = tiny_reward_model()
    assert not hasattr(model.backbone, "lm_head")
    assert model.head.in_features == model.backbone.config.hidden_size and model.head.out_features == 1
    score = model.score_text(joint_text([ACTION_0, ACTION_1], [PROMPT_0, PROMPT_1]))
    assert score.dim() == 0 and torch.isfinite(score)


def test_the_score_reads_the_last_attended_position_whatever_the_padding():
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 0, 0, 0, 0]])
    assert last_attended_index(mask).tolist() == [2, 4, 0]
    model = tiny_reward_model().eval()
    ids = model.encode(joint_text([ACTION_0, ACTION_1], [PROMPT_0, PROMPT_1]))
    alone = model(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long))
    padded_ids = torch.tensor([ids + [0, 0, 0]])
    padded_mask = torch.tensor([[1] * len(ids) + [0, 0, 0]])
    torch.testing.assert_close(model(padded_ids, padded_mask), alone, rtol=1e-5, atol=1e-5)


def test_gradient_reaches_the_head_and_the_backbone():
    model = tiny_reward_model()
    model.score_text(joint_text([ACTION_0, ACTION_1], [PROMPT_0, PROMPT_1])).backward()
    assert model.head.weight.grad is not None and model.head.weight.grad.abs().sum() > 0
    backbone_grads = [p.grad for p in model.backbone.parameters() if p.grad is not None]
    assert backbone_grads and any(g.abs().sum() > 0 for g in backbone_grads)


def test_a_frozen_backbone_trains_only_the_head():
    model = tiny_reward_model(freeze_backbone=True)
    assert [id(p) for p in model.trainable_parameters()] == [id(model.head.weight), id(model.head.bias)]


def test_a_frozen_backbone_fit_reads_each_text_once_and_fits_as_reading_it_every_epoch():
    texts = [joint_text([ACTION_0, ACTION_1.replace("Nord", f"Nord {i}")], [PROMPT_0, PROMPT_1]) for i in range(4)]
    comparisons = [PreferenceText(texts[0], texts[1]), PreferenceText(texts[2], texts[3]), PreferenceText(texts[0], texts[3])]
    settings = RewardFitSettings(learning_rate=1e-2, num_epochs=3, batch_size=2, seed=1)
    cached, every_epoch = tiny_reward_model(freeze_backbone=True), tiny_reward_model(freeze_backbone=True)
    every_epoch.freeze_backbone = False  # the same frozen weights, scored through the backbone at every update
    forwards = []
    cached.backbone.register_forward_hook(lambda module, args, output: forwards.append(1))
    results = [fit_reward_model(model, comparisons, settings) for model in (cached, every_epoch)]
    assert len(forwards) == len(texts)
    assert results[0] == results[1]
    torch.testing.assert_close(cached.head.weight, every_epoch.head.weight)


def test_an_input_above_the_limit_is_refused_not_truncated():
    model = tiny_reward_model(max_length=16)
    text = joint_text([ACTION_0, ACTION_1], [PROMPT_0, PROMPT_1])
    length = len(model.tokenizer.encode(text, add_special_tokens=False))
    assert length > 16
    with pytest.raises(RewardModelError, match=rf"{length} tokens, above algorithm.reward_max_length=16"):
        model.score_text(text)
    exact = tiny_reward_model(max_length=length)
    assert len(exact.encode(text)) == length  # at the limit: every token kept


def test_bradley_terry_loss_matches_its_formula():
    w, l = torch.tensor([2.0, -1.0]), torch.tensor([0.5, 0.0])
    expected = (torch.log1p(torch.exp(-torch.tensor(1.5))) + torch.log1p(torch.exp(torch.tensor(1.0)))) / 2
    torch.testing.assert_close(bradley_terry_loss(w, l), expected)


def test_fitting_moves_scores_towards_the_winners_then_freezes_the_model():
    model = tiny_reward_model()
    good = [joint_text([ACTION_0, ACTION_1.replace("Nord", name)], [PROMPT_0, PROMPT_1]) for name in ("Nord", "Sud")]
    dash = [assistant_prefill(0) + '-"}]}', assistant_prefill(1) + '-"}]}']
    bad = [joint_text(dash, [PROMPT_0, PROMPT_1 + suffix]) for suffix in ("a", "b")]
    comparisons = [PreferenceText(w, l) for w, l in zip(good, bad)]

    def margin():
        return sum(a - b for a, b in zip(model.score_texts(good), model.score_texts(bad)))

    before = margin()
    result = fit_reward_model(model, comparisons, RewardFitSettings(learning_rate=3e-3, num_epochs=8, batch_size=1, seed=0))
    assert result.updates == 16 and result.pairs == 2
    assert margin() > before + 0.5
    assert not model.training and not any(p.requires_grad for p in model.parameters())


def test_fitting_refuses_an_empty_set_and_bad_settings():
    with pytest.raises(RewardModelError, match="no preference pairs"):
        fit_reward_model(tiny_reward_model(), [], RewardFitSettings())
    with pytest.raises(RewardModelError, match="reward_learning_rate"):
        RewardFitSettings(learning_rate=0)
    with pytest.raises(RewardModelError, match="reward_train_batch_size"):
        RewardFitSettings(batch_size=0)


def test_a_model_without_hidden_size_is_refused():
    with pytest.raises(RewardModelError, match="hidden_size"):
        JointRewardModel(torch.nn.Linear(2, 2), None, max_length=8)


def test_a_local_reward_base_loads_in_its_saved_dtype_unless_one_is_named(tmp_path):
    tiny = build_tiny_random()
    tiny.model.save_pretrained(tmp_path)
    tiny.tokenizer.save_pretrained(tmp_path)
    backbone, tokenizer = load_pretrained_base(str(tmp_path))
    assert "lm_head" not in dict(backbone.named_modules()) and backbone.dtype == torch.float32
    assert tokenizer.encode("hello") == tiny.tokenizer.encode("hello")
    assert load_pretrained_base(str(tmp_path), dtype="bfloat16")[0].dtype == torch.bfloat16
