"""The shared-prefix attention kernels (travel/generation/prefix_attention.py) compute one attention: FlexAttention
over the prefix, or FlashAttention over its packed chunks or (one prompt) over its whole packed prefix, merged with the suffix by their log-sum-exps equals the
joint softmax over both, for one-token and jump-step query groups, padded prompts and partly written suffixes; and a
decoder over any kernel decodes the same tokens. On the CPU FlexAttention runs its eager reference and the chunked
kernel a plain torch reference of the FlashAttention call; a CUDA run checks the real kernels."""

from __future__ import annotations

import pytest
import torch

from tests.generation.conftest import short_request
from tests.generation.triton_interpreter import needs_interpreter
from travel.agents.models import build_tiny_random
from travel.generation import StructuredDecoder
from travel.generation.kernels.prefix_kernels import (
    chunked_flash_attention,
    chunked_triton_attention,
    flex_prefix_attention,
    split_flash_attention,
)
from travel.generation.prefix_attention import joint_softmax_attention, prefix_kernel, split_triton_attention
from travel.generation.prefix_merge import to_prompts, to_rows
from travel.generation.prefix_packing import WrittenSuffix, pack_prefix, prefix_chunks, prompt_tokens
from travel.generation.shared_prefix import split_prefix
from travel.generation.static_step import StaticPositionLayer


def attention_inputs(prompts, repeats, group, device="cpu", dtype=torch.float32, width=23, capacity=9, dim=16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    rows, kv_heads = prompts * repeats, 2

    def normal(*shape):
        return torch.randn(*shape, generator=generator).to(device=device, dtype=dtype)

    per_row = normal(rows, kv_heads, group, dim)
    prefix_keys, prefix_values = normal(prompts, kv_heads, width, dim), normal(prompts, kv_heads, width, dim)
    prefix_bias = torch.zeros(prompts, 1, 1, width, device=device)
    prefix_bias[-1, ..., :7] = float("-inf")  # the last prompt is shorter: left padding
    key, value = normal(rows, kv_heads, capacity, dim), normal(rows, kv_heads, capacity, dim)
    suffix_mask = torch.zeros(rows, 1, group, capacity, device=device)
    suffix_mask[..., 5:] = float("-inf")  # columns not written yet
    suffix_mask[0, ..., 2:5] = float("-inf")
    return per_row, prefix_keys, prefix_values, prefix_bias, key, value, suffix_mask, 0.3, repeats


def concatenated(per_row, prefix_keys, prefix_values, prefix_bias, key, value, suffix_mask, scale, repeats):
    """Each row attending over its own copy of its prompt followed by its suffix, in float64."""
    keys = torch.cat([prefix_keys.repeat_interleave(repeats, 0), key], dim=2).double()
    values = torch.cat([prefix_values.repeat_interleave(repeats, 0), value], dim=2).double()
    mask = torch.cat([prefix_bias.repeat_interleave(repeats, 0).expand(-1, -1, suffix_mask.shape[2], -1), suffix_mask], -1)
    return torch.softmax(per_row.double() @ keys.transpose(-1, -2) * scale + mask.double(), dim=-1) @ values


@pytest.mark.parametrize("prompts,repeats,group", [(2, 3, 4), (1, 1, 4), (2, 2, 12)], ids=["k3", "k1", "jump"])
@pytest.mark.parametrize("kernel", [joint_softmax_attention, flex_prefix_attention], ids=["joint_softmax", "flex"])
def test_each_kernel_is_the_attention_over_prompt_then_suffix(kernel, prompts, repeats, group):
    inputs = attention_inputs(prompts, repeats, group)
    got = kernel(*inputs)
    assert got.shape == inputs[0].shape and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), concatenated(*inputs), atol=2e-6, rtol=1e-5)


CHUNKED_KERNELS = {"chunked_flash": chunked_flash_attention, "chunked_triton": chunked_triton_attention}
WRITTEN_KERNELS = {**CHUNKED_KERNELS, "split_triton": split_triton_attention}  # the kernels that read the written columns


def chunked(per_prompt, per_row, prefix_keys, prefix_values, prefix_bias, key, value, suffix_mask, scale, repeats,
            kernel="chunked_flash"):
    """A chunked kernel over the same inputs: the prefix packed and cut into `per_prompt` chunks per prompt."""
    attention = (prefix_bias[:, 0, 0] == 0).long()
    chunks = prefix_chunks(attention, prefix_keys.shape[1], per_prompt)
    tokens = prompt_tokens(attention)
    packed_keys, packed_values = pack_prefix(prefix_keys, tokens), pack_prefix(prefix_values, tokens)
    return CHUNKED_KERNELS[kernel](per_row, packed_keys, packed_values, chunks, key, value, suffix_mask, scale, repeats)


@pytest.mark.parametrize("prompts,repeats,group", [(2, 3, 4), (1, 1, 4), (2, 2, 12)], ids=["k3", "k1", "jump"])
@pytest.mark.parametrize("per_prompt", [1, 3, 16], ids=["one-chunk", "three-chunks", "sixteen-chunks"])
def test_the_chunked_kernel_is_the_same_attention(per_prompt, prompts, repeats, group):
    inputs = attention_inputs(prompts, repeats, group)
    got = chunked(per_prompt, *inputs)
    assert got.shape == inputs[0].shape and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), concatenated(*inputs), atol=2e-6, rtol=1e-5)


def split(per_row, prefix_keys, prefix_values, prefix_bias, key, value, suffix_mask, scale, repeats, written=None):
    """The split kernel over the same inputs (one prompt): the prefix packed, the suffix as given."""
    attention = (prefix_bias[:, 0, 0] == 0).long()
    chunks, tokens = prefix_chunks(attention, prefix_keys.shape[1], 1), prompt_tokens(attention)
    packed = pack_prefix(prefix_keys, tokens), pack_prefix(prefix_values, tokens)
    return split_flash_attention(per_row, *packed, chunks, key, value, suffix_mask, scale, repeats, written)


@pytest.mark.parametrize("repeats,group", [(3, 4), (1, 4), (2, 12)], ids=["k3", "k1", "jump"])
def test_the_split_kernel_is_the_same_attention(repeats, group):
    inputs = attention_inputs(1, repeats, group)
    got = split(*inputs)
    assert got.shape == inputs[0].shape and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), concatenated(*inputs), atol=2e-6, rtol=1e-5)


def test_the_split_kernel_attends_one_prompt():
    inputs = attention_inputs(2, 3, 4)
    with pytest.raises(ValueError, match="prefix_attention='split_flash' attends one prompt's prefix; this step has 2"):
        split(*inputs)


def written_inputs(prompts, repeats, per_kv, positions, device="cpu", dtype=torch.float32, capacity=9, **sizes):
    """`attention_inputs` whose suffix mask opens what `WrittenSuffix` says: row r has written `lengths[r]` columns,
    and its query heads x `positions` new queries (position minor) see the columns up to their own."""
    *inputs, _, scale, repeats = attention_inputs(prompts, repeats, per_kv * positions, device, dtype, capacity=capacity, **sizes)
    rows = prompts * repeats
    lengths = torch.tensor([positions + (3 * r) % (capacity - positions + 1) for r in range(rows)], dtype=torch.int32)
    position = torch.arange(positions).repeat(per_kv)  # of each query in the group
    last_seen = lengths[:, None] - positions + position[None, :]  # (rows, group)
    hidden = torch.arange(capacity)[None, None, :] > last_seen[:, :, None]
    suffix_mask = torch.zeros(rows, 1, per_kv * positions, capacity).masked_fill(hidden[:, None], float("-inf"))
    written = WrittenSuffix.of(lengths.to(device), positions, capacity)
    return (*inputs, suffix_mask.to(device), scale, repeats), written


@pytest.mark.parametrize("kernel", [
    pytest.param(name, marks=needs_interpreter) if name == "split_triton" else name for name in sorted(WRITTEN_KERNELS)
])  # split_triton calls its kernels on any tensor; the others run them where triton_runs says
@pytest.mark.parametrize("prompts,repeats,per_kv,positions", [(2, 3, 2, 1), (1, 1, 4, 1), (2, 2, 2, 5), (2, 20, 2, 4)],
                         ids=["k3", "k1", "jump", "beyond-one-query-tile"])
def test_the_chunked_kernel_over_the_written_suffix_alone_is_the_same_attention(prompts, repeats, per_kv, positions, kernel):
    inputs, written = written_inputs(prompts, repeats, per_kv, positions)
    expected = concatenated(*inputs)
    per_row, prefix_keys, prefix_values, prefix_bias, key, value, _, scale, repeats = inputs
    attention = (prefix_bias[:, 0, 0] == 0).long()
    chunks, tokens = prefix_chunks(attention, prefix_keys.shape[1], 3), prompt_tokens(attention)
    packed = pack_prefix(prefix_keys, tokens), pack_prefix(prefix_values, tokens)
    poisoned = [tensor.clone() for tensor in (key, value)]
    for row, length in enumerate(written.lengths.tolist()):
        for tensor in poisoned:
            tensor[row, :, length:] = float("nan")  # columns past a row's written end must not be read
    got = WRITTEN_KERNELS[kernel](per_row, *packed, chunks, *poisoned, None, scale, repeats, written)
    torch.testing.assert_close(got.double(), expected, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("repeats,per_kv,positions", [(3, 2, 1), (1, 4, 1), (2, 2, 5)], ids=["k3", "k1", "jump"])
def test_the_split_kernel_over_the_written_suffix_alone_is_the_same_attention(repeats, per_kv, positions):
    inputs, written = written_inputs(1, repeats, per_kv, positions)
    expected = concatenated(*inputs)
    *prefix, key, value, _, scale, repeats = inputs
    poisoned = [tensor.clone() for tensor in (key, value)]
    for row, length in enumerate(written.lengths.tolist()):
        for tensor in poisoned:
            tensor[row, :, length:] = float("nan")  # columns past a row's written end must not be read
    got = split(*prefix, *poisoned, None, scale, repeats, written)
    torch.testing.assert_close(got.double(), expected, atol=2e-6, rtol=1e-5)


def test_the_chunked_kernels_suffix_buffers_are_laid_out_for_flash_attention():
    class Layer:
        def __init__(self, keys):
            self._key_buffer, self._value_buffer = keys, keys.clone()

    class Cache:
        def __init__(self):
            self.layers = [Layer(torch.randn(2, 2, 6, 4)) for _ in range(3)]

    cache, attention = Cache(), torch.tensor([[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]])
    layer = lambda keys, values, token_major: StaticPositionLayer(keys, values, torch.tensor([3]), token_major)  # noqa: E731
    state = split_prefix(cache, attention, repeats=3, capacity=16, suffix_layer=layer, kernel="chunked_flash")
    assert state.written.lengths.tolist() == [0] * 6 and state.written.lengths.dtype == torch.int32
    for suffix in cache.layers:
        assert suffix.token_major and all(buffer.shape == (6, 16, 2, 4) for buffer in suffix.buffers)
        new = torch.randn(6, 2, 1, 4)
        keys, values = suffix.update(new, 2 * new)
        assert keys.shape == values.shape == (6, 2, 16, 4)
        assert torch.equal(keys[:, :, 3:4], new) and torch.equal(values[:, :, 3:4], 2 * new)
        assert torch.equal(suffix.buffers[0][:, 3], new[:, :, 0]) and suffix.buffers[0][:, 2].abs().sum() == 0
    joint = split_prefix(Cache(), attention, 3, 16, layer, "joint_softmax")
    assert joint.written is None


def test_the_split_kernels_prefix_is_packed_for_one_prompt_alone():
    class Layer:
        def __init__(self, keys):
            self._key_buffer, self._value_buffer = keys, keys.clone()

    class Cache:
        def __init__(self, prompts):
            self.layers = [Layer(torch.randn(prompts, 2, 6, 4)) for _ in range(2)]

    layer = lambda keys, values, token_major: StaticPositionLayer(keys, values, torch.tensor([0]), token_major)  # noqa: E731
    state = split_prefix(Cache(1), torch.tensor([[0, 1, 1, 1, 1, 1]]), 4, 16, layer, "split_flash")
    assert state.layout.prompts == 1 and state.layout.per_prompt == 1 and state.written is not None
    assert all(keys.shape == (5, 2, 4) for keys, _ in state.layers)  # the prompt's tokens, its padding dropped
    with pytest.raises(ValueError, match="prefix_attention='split_flash' attends one prompt; this call has 2"):
        split_prefix(Cache(2), torch.ones(2, 6, dtype=torch.long), 4, 16, layer, "split_flash")


def test_the_flex_merge_needs_both_parts():
    """Each part alone is far from the attention: the comparison above can fail."""
    per_row, keys, values, bias, key, value, mask, scale, repeats = attention_inputs(2, 3, 4)
    expected = concatenated(per_row, keys, values, bias, key, value, mask, scale, repeats)
    no_suffix = flex_prefix_attention(per_row, keys, values, bias, key, value, torch.full_like(mask, float("-inf")), scale, repeats)
    no_prefix = flex_prefix_attention(per_row, keys, values, torch.full_like(bias, float("-inf")), key, value, mask, scale, repeats)
    for wrong in (no_suffix, no_prefix):
        assert torch.isfinite(wrong).all()
        assert (wrong.double() - expected).abs().max() > 0.05


def test_rows_and_prompts_layouts_invert_each_other():
    tensor = torch.arange(2 * 3 * 5 * 4 * 7).reshape(6, 5, 4, 7)
    per_prompt = to_prompts(tensor, prompts=2, repeats=3)
    assert per_prompt.shape == (2, 5, 12, 7)
    assert torch.equal(per_prompt[1, 2, 4:8], tensor[4, 2])  # prompt 1's second row is row 4
    assert torch.equal(to_rows(per_prompt, prompts=2, repeats=3), tensor)


def test_auto_off_a_gpu_is_the_joint_softmax_and_a_wrong_name_is_named():
    assert prefix_kernel("auto") == "joint_softmax"
    assert prefix_kernel("auto", torch.device("cpu"), torch.bfloat16, rows=20) == "joint_softmax"
    assert prefix_kernel("flex") == "flex"
    assert prefix_kernel("chunked_flash") == "chunked_flash"
    with pytest.raises(ValueError, match="prefix_attention must be one of auto, joint_softmax, flex, chunked_flash, split_flash, "
                                         "chunked_triton, split_triton; got 'fast'"):
        prefix_kernel("fast")
    tiny = build_tiny_random(seed=1)
    with pytest.raises(ValueError, match="prefix_attention='fast'"):
        StructuredDecoder(tiny.model, tiny.tokenizer, prefix_attention="fast")


@pytest.mark.parametrize("jump", [False, True], ids=["one-token", "jump"])
@pytest.mark.parametrize("greedy", [True, False], ids=["greedy", "seeded"])
def test_a_decoder_over_either_kernel_decodes_the_same_actions(jump, greedy):
    tiny = build_tiny_random(seed=1)
    requests = [short_request(tiny.tokenizer, agent, 3) for agent in (0, 1)]
    settings = dict(step_backend="static", share_prompt_cache="always", max_new_tokens=300, max_value_tokens=5, jump_forced=jump)
    results = []
    for kernel in ("joint_softmax", "flex", "chunked_flash"):
        decoder = StructuredDecoder(tiny.model, tiny.tokenizer, prefix_attention=kernel, **settings)
        assert decoder.with_model(tiny.model).prefix_attention == kernel
        groups = decoder.generate(requests, 3, greedy=greedy, return_logprobs=True, seeds=None if greedy else [5, 9])
        results.append([(c.text, c.token_ids.tolist(), c.value_mask.tolist(), c.logprob) for g in groups for c in g])
    joint, *others = results
    for other in others:
        assert [c[:3] for c in other] == [c[:3] for c in joint]
        assert [c[3] for c in other] == pytest.approx([c[3] for c in joint], rel=1e-4, abs=1e-5)


@needs_interpreter
@pytest.mark.parametrize("jump,greedy", [(False, True), (True, False)], ids=["one-token-greedy", "jump-seeded"])
def test_a_decoder_over_the_triton_kernels_decodes_the_joint_softmaxs_actions(jump, greedy):
    """The Triton kernels themselves, through Triton's interpreter on the CPU (tests/conftest.py), one short day per
    role (the interpreter takes tens of milliseconds a call)."""
    from travel.generation.triton_varlen import triton_runs

    pytest.importorskip("triton", reason="triton installs on Linux x86-64 alone (the test extra brings it there)")
    assert triton_runs(torch.zeros(1)), "the CPU tests run the Triton kernel through Triton's interpreter"
    tiny = build_tiny_random(seed=1)
    # the interpreter runs every program of a launch in Python, so the one-token decode (about 40 forwards) takes one
    # prompt, the jump decode (fewer forwards) both roles' prompts
    requests = [short_request(tiny.tokenizer, agent, 1) for agent in ((0, 1) if jump else (1,))]
    settings = dict(step_backend="static", share_prompt_cache="always", max_new_tokens=120, max_value_tokens=4, jump_forced=jump)
    results = []
    for kernel in ("joint_softmax", "split_triton"):
        decoder = StructuredDecoder(tiny.model, tiny.tokenizer, prefix_attention=kernel, **settings)
        groups = decoder.generate(requests, 2, greedy=greedy, return_logprobs=True, seeds=None if greedy else [5, 9])
        results.append([(c.text, c.token_ids.tolist(), c.value_mask.tolist(), c.logprob) for g in groups for c in g])
    joint, *triton_kernels = results
    for triton_kernel in triton_kernels:
        assert [c[:3] for c in triton_kernel] == [c[:3] for c in joint]
        assert [c[3] for c in triton_kernel] == pytest.approx([c[3] for c in joint], rel=1e-4, abs=1e-5)


@pytest.mark.parametrize("jump", [False, True], ids=["one-token", "jump"])
@pytest.mark.parametrize("greedy", [True, False], ids=["greedy", "seeded"])
def test_a_decoder_over_the_split_kernel_decodes_the_joint_softmaxs_actions(jump, greedy):
    tiny = build_tiny_random(seed=1)
    requests = [short_request(tiny.tokenizer, 1, 3)]  # split_flash attends one prompt
    settings = dict(step_backend="static", share_prompt_cache="always", max_new_tokens=300, max_value_tokens=5, jump_forced=jump)
    results = []
    for kernel in ("joint_softmax", "split_flash"):
        decoder = StructuredDecoder(tiny.model, tiny.tokenizer, prefix_attention=kernel, **settings)
        groups = decoder.generate(requests, 3, greedy=greedy, return_logprobs=True, seeds=None if greedy else [5])
        results.append([(c.text, c.token_ids.tolist(), c.value_mask.tolist(), c.logprob) for g in groups for c in g])
    joint, split_kernel = results
    assert [c[:3] for c in split_kernel] == [c[:3] for c in joint]
    assert [c[3] for c in split_kernel] == pytest.approx([c[3] for c in joint], rel=1e-4, abs=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the compiled FlexAttention kernel needs CUDA")
@pytest.mark.parametrize("prompts,repeats,group", [(2, 20, 4), (1, 1, 4), (2, 4, 32)], ids=["k20", "k1", "jump"])
def test_the_compiled_flex_kernel_on_cuda_matches_the_joint_softmax(prompts, repeats, group):
    inputs = attention_inputs(prompts, repeats, group, "cuda", torch.bfloat16, width=3000, capacity=256, dim=128)
    expected = concatenated(*inputs)
    flex_error = (flex_prefix_attention(*inputs).double() - expected).abs().max().item()
    joint_error = (joint_softmax_attention(*inputs).double() - expected).abs().max().item()
    assert flex_error <= max(2 * joint_error, 1e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch's FlashAttention kernel needs CUDA")
@pytest.mark.parametrize("prompts,repeats,group", [(2, 20, 4), (1, 1, 4), (2, 4, 32)], ids=["k20", "k1", "jump"])
@pytest.mark.parametrize("per_prompt", [1, 16], ids=["one-chunk", "sixteen-chunks"])
def test_the_flash_chunked_kernel_on_cuda_matches_the_joint_softmax(per_prompt, prompts, repeats, group):
    inputs = attention_inputs(prompts, repeats, group, "cuda", torch.bfloat16, width=3000, capacity=256, dim=128)
    expected = concatenated(*inputs)
    chunked_error = (chunked(per_prompt, *inputs).double() - expected).abs().max().item()
    joint_error = (joint_softmax_attention(*inputs).double() - expected).abs().max().item()
    assert chunked_error <= max(2 * joint_error, 1e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch's FlashAttention and the Triton kernel need CUDA")
@pytest.mark.parametrize("kernel", sorted(CHUNKED_KERNELS))
@pytest.mark.parametrize("prompts,repeats,per_kv,positions", [(2, 20, 4, 1), (1, 1, 4, 1), (2, 4, 4, 8), (10, 4, 4, 1)],
                         ids=["k20", "k1", "jump", "magrpo"])
def test_the_flash_written_suffix_on_cuda_matches_the_joint_softmax(prompts, repeats, per_kv, positions, kernel):
    inputs, written = written_inputs(prompts, repeats, per_kv, positions, "cuda", torch.bfloat16, capacity=256,
                                     width=3000, dim=128)
    expected = concatenated(*inputs)
    per_row, prefix_keys, prefix_values, prefix_bias, key, value, _, scale, repeats = inputs
    attention = (prefix_bias[:, 0, 0] == 0).long()
    chunks, tokens = prefix_chunks(attention, prefix_keys.shape[1]), prompt_tokens(attention)
    packed = pack_prefix(prefix_keys, tokens), pack_prefix(prefix_values, tokens)
    laid_out = [tensor.transpose(1, 2).contiguous().transpose(1, 2) for tensor in (key, value)]  # as split_prefix lays it
    got = CHUNKED_KERNELS[kernel](per_row, *packed, chunks, *laid_out, None, scale, repeats, written)
    written_error = (got.double() - expected).abs().max().item()
    joint_error = (joint_softmax_attention(*inputs).double() - expected).abs().max().item()
    assert written_error <= max(2 * joint_error, 1e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch's FlashAttention kernel needs CUDA")
@pytest.mark.parametrize("repeats,per_kv,positions", [(20, 4, 1), (1, 4, 1), (4, 4, 8)], ids=["k20", "k1", "jump"])
def test_the_flash_split_kernel_on_cuda_matches_the_joint_softmax(repeats, per_kv, positions):
    inputs, written = written_inputs(1, repeats, per_kv, positions, "cuda", torch.bfloat16, capacity=256, width=6000, dim=128)
    expected = concatenated(*inputs)
    *prefix, key, value, _, scale, repeats = inputs
    laid_out = [tensor.transpose(1, 2).contiguous().transpose(1, 2) for tensor in (key, value)]  # as split_prefix lays it
    split_error = (split(*prefix, *laid_out, None, scale, repeats, written).double() - expected).abs().max().item()
    joint_error = (joint_softmax_attention(*inputs).double() - expected).abs().max().item()
    assert split_error <= max(2 * joint_error, 1e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the automatic choice differs on a GPU")
def test_auto_on_a_gpu_reads_every_step_by_the_triton_split_kernels_in_half_precision():
    cuda = torch.device("cuda")
    assert prefix_kernel("auto", cuda, torch.bfloat16, rows=20) == "split_triton"
    assert prefix_kernel("auto", cuda, torch.bfloat16, rows=40, prompts=10) == "split_triton"
    assert prefix_kernel("auto", cuda, torch.bfloat16, rows=1) == "split_triton"
    assert prefix_kernel("auto", cuda, torch.float32, rows=20) == "joint_softmax"


def test_auto_where_flash_attention_runs_picks_by_rows_and_prompts(monkeypatch):
    """The choice itself, on the CPU: where FlashAttention is reported to run, every step takes split_triton; without
    triton one prompt of several rows takes split_flash, several prompts chunked_flash, one row the joint softmax."""
    import travel.generation.prefix_attention as module

    monkeypatch.setattr(module, "flash_attention_runs", lambda device, dtype: True)
    monkeypatch.setattr(module, "triton_available", lambda: True)
    cpu = torch.device("cpu")
    for rows, prompts in ((20, 1), (4, 2), (1, 1)):
        assert prefix_kernel("auto", cpu, torch.bfloat16, rows=rows, prompts=prompts) == "split_triton"
    monkeypatch.setattr(module, "triton_available", lambda: False)
    assert prefix_kernel("auto", cpu, torch.bfloat16, rows=20, prompts=1) == "split_flash"
    assert prefix_kernel("auto", cpu, torch.bfloat16, rows=4, prompts=2) == "chunked_flash"
    for name in ("chunked_triton", "split_triton"):
        with pytest.raises(ValueError, match=rf"prefix_attention='{name}' needs the triton package"):
            prefix_kernel(name)
    assert prefix_kernel("auto", cpu, torch.bfloat16, rows=1, prompts=1) == "joint_softmax"
    assert prefix_kernel("joint_softmax", cpu, torch.bfloat16, rows=20) == "joint_softmax"
