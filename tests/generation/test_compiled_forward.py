"""hardware.compile_decode and compile_prefill (travel/generation/compiled_forward.py): static decode steps whose
forward and prompt prefill run through torch.compile give the tokens, texts and value masks of the plain ones, greedy and
seeded, and log-probs equal to float rounding; a forward that cannot be compiled runs plain, with a warning."""

from __future__ import annotations

import pytest
import torch

from tests.generation.conftest import short_request
from travel.agents.models import build_tiny_random
from travel.generation import StructuredDecoder
from travel.generation.compiled_forward import COMPILED_FORWARD, COMPILED_PROMPT_FORWARD, CompiledForward


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_random(seed=2)


def decoded(decoder, requests, greedy):
    groups = decoder.generate(requests, 3, greedy=greedy, return_logprobs=True, seeds=None if greedy else [5, 9])
    return [(c.text, c.token_ids.tolist(), c.value_mask.tolist(), c.logprob) for group in groups for c in group]


@pytest.mark.parametrize("greedy", [True, False], ids=["greedy", "seeded"])
def test_compiled_steps_decode_as_the_plain_steps_do(tiny, greedy):
    requests = [short_request(tiny.tokenizer, agent, 2) for agent in (0, 1)]
    settings = {"step_backend": "static", "share_prompt_cache": "always", "max_new_tokens": 300, "max_value_tokens": 4}
    plain = decoded(StructuredDecoder(tiny.model, tiny.tokenizer, **settings), requests, greedy)
    prefills = COMPILED_PROMPT_FORWARD.compiled_calls
    compiled = decoded(
        StructuredDecoder(tiny.model, tiny.tokenizer, compile_decode=True, compile_prefill=True, **settings), requests, greedy
    )
    assert not COMPILED_FORWARD.failed  # the compiled forward ran, not the fallback
    assert COMPILED_PROMPT_FORWARD.compiled_calls == prefills + len(requests)  # each prompt's prefill compiled
    assert [c[:3] for c in compiled] == [c[:3] for c in plain]
    assert [c[3] for c in compiled] == pytest.approx([c[3] for c in plain], rel=1e-4, abs=1e-5)


@pytest.mark.parametrize("option", ["compile_decode", "compile_prefill"])
def test_compile_decode_and_compile_prefill_compile_the_steps_and_the_prefill_alone(tiny, option):
    requests = [short_request(tiny.tokenizer, agent, 2) for agent in (0, 1)]
    settings = {"step_backend": "static", "share_prompt_cache": "always", "max_new_tokens": 300, "max_value_tokens": 4}
    plain = decoded(StructuredDecoder(tiny.model, tiny.tokenizer, **settings), requests, True)
    steps, prefills = COMPILED_FORWARD.compiled_calls, COMPILED_PROMPT_FORWARD.compiled_calls
    compiled = decoded(StructuredDecoder(tiny.model, tiny.tokenizer, **{option: True}, **settings), requests, True)
    stepped, prefilled = COMPILED_FORWARD.compiled_calls - steps, COMPILED_PROMPT_FORWARD.compiled_calls - prefills
    assert (stepped > 0, prefilled) == ((True, 0) if option == "compile_decode" else (False, len(requests)))
    assert [c[:3] for c in compiled] == [c[:3] for c in plain]


def test_a_forward_that_cannot_be_compiled_runs_plain_with_a_warning():
    def refusing_backend(graph, example_inputs):
        raise RuntimeError("no compiler here")

    forward = CompiledForward(lambda x: x * 2 + 1, backend=refusing_backend)
    with pytest.warns(UserWarning, match="(?s)torch.compile of the decode step failed .*no compiler here.*without torch.compile"):
        assert torch.equal(forward(torch.ones(3)), torch.full((3,), 3.0))
    assert forward.failed
    assert torch.equal(forward(torch.zeros(2)), torch.ones(2))  # plain from now on, without compiling again


def test_compile_decode_and_compile_prefill_are_settings_a_comparator_decoder_copies(tiny):
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, compile_decode=True, compile_prefill=True)
    copy = decoder.with_model(tiny.model)
    assert (copy.compile_decode, copy.compile_prefill) == (True, True)


def test_a_recompile_limit_lets_every_variant_compile():
    """Dynamo compiles at most 8 graphs per function by default and runs later variants plain; the decode loop
    has more variants than that (draws, jumps, catalogs, log-probs, sizes), so its functions raise the limit."""

    def shifted(x, name):
        return x + len(name)

    def graphs() -> int:
        return torch._dynamo.utils.counters["stats"]["unique_graphs"]

    forward = CompiledForward(shifted, recompile_limit=16)
    before = graphs()
    for length in range(12):  # a new string constant each call: a new graph each call
        assert torch.equal(forward(torch.zeros(2), "x" * length), torch.full((2,), float(length)))
    assert graphs() - before == 12
