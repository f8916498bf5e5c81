"""hardware.compile_update (travel/agents/compiled_layers.py): the update's decoder layers through torch.compile
give the eager layers' log-probs and gradients, through activation checkpointing and the packed one-mask
update, at a second sequence length too; forwards without gradients (decoding) and forwards with a key/value
cache (the update over the prompt's cache) keep the eager layers."""

from __future__ import annotations

import copy

import pytest
import torch

from travel.agents.layouts import build_layout
from travel.agents.compiled_layers import (
    _COMPILED,
    carries_cache,
    compile_update_layers,
    decoder_layers,
    eager_update_layers,
    update_layers_compiled,
)
from travel.agents.models import build_tiny_random, checkpoint_first_layers
from travel.algorithms.core.losses import prompt_cache_usable, shared_prompt_value_logprobs


def packed_update(model, prompt_tokens: int, lengths: list[int]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Log-probs of a prompt's candidates packed under one mask (checkpointing drops the cache) and the
    gradients of their sum."""
    generator = torch.Generator().manual_seed(prompt_tokens)
    prompt = torch.randint(0, 200, (prompt_tokens,), generator=generator)
    completions = [torch.randint(0, 200, (n,), generator=generator) for n in lengths]
    masks = [(torch.arange(n) % 3 != 1).long() for n in lengths]
    model.zero_grad()
    logprobs = shared_prompt_value_logprobs(model, prompt, completions, masks)
    logprobs.sum().backward()
    return logprobs.detach(), [parameter.grad.clone() for parameter in model.parameters()]


@pytest.fixture()
def checkpointed():
    model = build_tiny_random(seed=3, gradient_checkpointing=True).model
    model.train()
    yield model
    eager_update_layers(model)


def test_compiled_layers_give_the_eager_update_at_two_sequence_lengths(checkpointed):
    shapes = [(41, [7, 9, 4]), (53, [5, 12])]  # the second length compiles again, with dynamic sizes
    eager = [packed_update(checkpointed, prompt, lengths) for prompt, lengths in shapes]
    compile_update_layers(checkpointed)
    assert update_layers_compiled(checkpointed)
    compiled = [packed_update(checkpointed, prompt, lengths) for prompt, lengths in shapes]
    function = _COMPILED[type(decoder_layers(checkpointed)[0])]
    assert function._compiled is not None and not function.failed  # the compiled function ran, not the fallback
    for (eager_logprobs, eager_grads), (compiled_logprobs, compiled_grads) in zip(eager, compiled):
        torch.testing.assert_close(compiled_logprobs, eager_logprobs, rtol=1e-5, atol=1e-5)
        for compiled_grad, eager_grad in zip(compiled_grads, eager_grads):
            torch.testing.assert_close(compiled_grad, eager_grad, rtol=1e-4, atol=1e-6)


def test_compiled_layers_with_the_first_layer_alone_checkpointed_give_the_eager_update(checkpointed):
    eager = packed_update(checkpointed, 41, [7, 9, 4])  # every layer checkpointed, eager
    checkpoint_first_layers(checkpointed, 1)
    compile_update_layers(checkpointed)
    assert prompt_cache_usable(checkpointed) is False  # still the one-mask form: some layer checkpoints
    compiled_logprobs, compiled_grads = packed_update(checkpointed, 41, [7, 9, 4])
    function = _COMPILED[type(decoder_layers(checkpointed)[0])]
    assert function._compiled is not None and not function.failed
    torch.testing.assert_close(compiled_logprobs, eager[0], rtol=1e-5, atol=1e-5)
    for compiled_grad, eager_grad in zip(compiled_grads, eager[1]):
        torch.testing.assert_close(compiled_grad, eager_grad, rtol=1e-4, atol=1e-6)


def test_forwards_without_gradients_keep_the_eager_layers(checkpointed, monkeypatch):
    compile_update_layers(checkpointed)
    function = _COMPILED[type(decoder_layers(checkpointed)[0])]
    calls = []
    monkeypatch.setattr(function, "function", lambda *args, **kwargs: calls.append(1))  # noqa: ARG005
    monkeypatch.setattr(function, "failed", True)  # any call of the compiled path would now land in `calls`
    with torch.no_grad():
        checkpointed(input_ids=torch.tensor([[1, 2, 3]]))
    assert calls == []
    eager_update_layers(checkpointed)
    assert not update_layers_compiled(checkpointed)


def test_the_update_over_the_prompts_cache_keeps_the_eager_layers():
    model = build_tiny_random(seed=3).model  # no checkpointing: the update runs over the prompt's cache
    model.train()
    assert prompt_cache_usable(model)
    eager = packed_update(model, 41, [7, 9, 4])
    compile_update_layers(model)
    compiled_calls = []
    for layer in decoder_layers(model):
        function = layer.forward.compiled
        layer.forward.compiled = lambda *args, _function=function, **kwargs: (  # noqa: E731
            compiled_calls.append(carries_cache(kwargs)) or _function(*args, **kwargs)
        )
    over_cache = packed_update(model, 41, [7, 9, 4])
    assert compiled_calls == []
    torch.testing.assert_close(over_cache[0], eager[0])
    eager_update_layers(model)


def test_a_deep_copy_routes_its_own_layers_through_the_shared_compiled_function(checkpointed):
    compile_update_layers(checkpointed)
    clone = copy.deepcopy(checkpointed)
    for original, copied in zip(decoder_layers(checkpointed), decoder_layers(clone)):
        assert copied.forward.layer is copied and copied.forward.compiled is original.forward.compiled
    torch.testing.assert_close(packed_update(clone, 41, [7, 9])[0], packed_update(checkpointed, 41, [7, 9])[0])


def test_compile_update_reaches_every_actor_and_a_model_without_layers_is_named():
    hardware = {"agent_devices": ["cpu", "cpu"], "parallel_training": "none", "compile_update": True}
    generation = {"max_new_tokens": 400, "max_value_tokens": 2, "temperature": 0.7, "top_p": 0.8}
    actors = build_layout(build_tiny_random, hardware, generation, learning_rate=2e-5, seed=0)
    assert [update_layers_compiled(actor.model) for actor in actors] == [True, True]
    plain = build_layout(build_tiny_random, {**hardware, "compile_update": False}, generation, learning_rate=2e-5, seed=0)
    assert [update_layers_compiled(actor.model) for actor in plain] == [False, False]
    with pytest.raises(ValueError, match="hardware.compile_update=true: Linear has no decoder layers"):
        compile_update_layers(torch.nn.Linear(2, 2))
