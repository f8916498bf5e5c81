"""The two-kernel Triton decode attention (travel/generation/triton_split.py) is the shared-prefix attention: each
row's queries over its prompt's packed prefix, cut into chunks, and over its own written suffix columns (causal to
the written end), under one softmax, as the joint softmax computes it from the suffix mask. On the CPU Triton's
interpreter runs the kernels (tests/conftest.py); on a GPU the compiled kernels run in bfloat16."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.generation.test_prefix_attention import concatenated, written_inputs
from tests.generation.triton_interpreter import needs_interpreter
from travel.generation import triton_split
from travel.generation.prefix_attention import joint_softmax_attention
from travel.generation.prefix_packing import pack_prefix, prefix_chunks, prompt_tokens
from travel.generation.triton_split import LARGEST_CHUNK_TILE, chunk_tiles, split_triton_attention

pytest.importorskip("triton", reason="triton installs on Linux x86-64 alone (the test extra brings it there)")


def packed_arguments(inputs, written, per_prompt=None, poison=True, one_wave=True):
    """`split_triton_attention`'s arguments for `written_inputs`: the prefix packed and cut into `per_prompt` chunks,
    the suffix laid out token-major as the decoder lays it, every column past a row's written end NaN."""
    per_row, prefix_keys, prefix_values, prefix_bias, key, value, _, scale, repeats = inputs
    attention = (prefix_bias[:, 0, 0] == 0).long()
    chunks, tokens = prefix_chunks(attention, prefix_keys.shape[1], per_prompt, one_wave), prompt_tokens(attention)
    packed = pack_prefix(prefix_keys, tokens), pack_prefix(prefix_values, tokens)
    suffix = [tensor.transpose(1, 2).contiguous().transpose(1, 2) for tensor in (key, value)]
    if poison:
        for row, length in enumerate(written.lengths.tolist()):
            for tensor in suffix:
                tensor[row, :, length:] = float("nan")  # columns past a row's written end must not be read
    return per_row, *packed, chunks, *suffix, None, scale, repeats, written


def packed_call(inputs, written, per_prompt=None, poison=True, one_wave=True):
    return split_triton_attention(*packed_arguments(inputs, written, per_prompt, poison, one_wave))


@needs_interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("per_prompt", [1, 3], ids=["one-chunk", "three-chunks"])
@pytest.mark.parametrize("prompts,repeats,per_kv,positions", [(2, 3, 2, 1), (1, 1, 4, 1), (2, 2, 2, 5), (1, 20, 4, 1)],
                         ids=["k3", "k1", "jump", "k20"])
def test_the_two_kernels_are_the_joint_softmax_over_prefix_and_written_suffix(prompts, repeats, per_kv, positions, per_prompt, dtype):
    inputs, written = written_inputs(prompts, repeats, per_kv, positions, dtype=dtype)
    got = packed_call(inputs, written, per_prompt)
    assert got.shape == inputs[0].shape and got.dtype == dtype and got.is_contiguous()
    tolerance = 2e-6 if dtype == torch.float32 else 2e-3  # float16 partials round once more than the joint softmax
    torch.testing.assert_close(got.double(), concatenated(*inputs), atol=tolerance, rtol=tolerance)


@needs_interpreter
@pytest.mark.parametrize("repeats,per_kv,positions", [(4, 4, 1), (1, 4, 5), (1, 4, 1)],
                         ids=["four-candidates", "jump", "one-candidate"])
def test_the_merge_kernel_merges_every_rows_parts_in_one_launch(repeats, per_kv, positions, monkeypatch):
    """Several candidates, a jump step's wider group (4 heads x 5 positions) and one candidate alike: the partials
    launch, then one launch of the merge kernel (merging in the partials launch was slower: the module's docstring)."""
    launches = []
    merge = triton_split._MERGE

    class Recording:
        def __getitem__(self, grid):
            launches.append(grid)
            return merge[grid]

    monkeypatch.setattr(triton_split, "_MERGE", Recording())
    inputs, written = written_inputs(2, repeats, per_kv, positions)
    got = packed_call(inputs, written, 2)
    assert len(launches) == 1
    torch.testing.assert_close(got.double(), concatenated(*inputs), atol=2e-6, rtol=2e-6)


@pytest.mark.parametrize("queries,largest,tiles", [
    (4, 64, (16, 1, 0)), (48, 64, (64, 1, 0)), (64, 64, (64, 1, 0)), (80, 64, (64, 1, 16)), (128, 64, (64, 2, 0)),
    (160, 64, (64, 2, 32)), (80, 128, (128, 1, 0)), (300, 128, (128, 2, 64)),
])
def test_a_chunks_queries_take_full_tiles_and_a_tail_of_the_power_of_two_that_holds_the_rest(queries, largest, tiles):
    assert chunk_tiles(queries, largest) == tiles


def test_twenty_candidates_of_four_query_heads_compute_sixty_four_and_sixteen_rows():
    assert LARGEST_CHUNK_TILE == 64 and chunk_tiles(20 * 4) == (64, 1, 16)


@pytest.mark.parametrize("group,launch", [(1, (1, 1)), (4, (4, 1)), (8, (8, 4)), (20, (16, 4)), (160, (16, 4))])
def test_a_rows_query_heads_merge_in_a_tile_of_their_own_on_one_warp_while_it_is_small(group, launch):
    """A one-token step's 4 query heads merge in 4 rows on one warp; wider groups (jump steps) in 8 or 16 rows on
    four (`merge_launch`; the timings behind the rule are at SMALL_MERGE_ROWS)."""
    assert triton_split.merge_launch(group) == launch


@needs_interpreter
def test_queries_beyond_one_tile_are_split_into_blocks():
    """A prompt's 20 rows x 2 heads x 4 jump positions (160 queries) take two full query tiles of the prefix kernel
    and a tail tile, and a row's 4 heads x 40 positions (160) three blocks of its suffix and ten of the merge."""
    for per_kv, positions, repeats in ((2, 4, 20), (4, 40, 2)):
        inputs, written = written_inputs(1, repeats, per_kv, positions, capacity=48, width=40)
        torch.testing.assert_close(packed_call(inputs, written, 2).double(), concatenated(*inputs), atol=2e-6, rtol=1e-5)


@needs_interpreter
@pytest.mark.parametrize("repeats", [1, 3], ids=["one-candidate", "several-candidates"])
def test_a_chunk_of_several_key_blocks_and_a_partial_last_one_is_the_joint_softmax(repeats):
    """Each launch setting's key blocks (`partials_launch`: 64 keys for one candidate, 32 for several) over one chunk
    of 2.5 of its blocks and a suffix of 1.5, so the online softmax rescales what earlier blocks summed."""
    block_keys = triton_split.partials_launch(2, repeats, 16)[0]
    width, capacity = 5 * block_keys // 2 + 7, 3 * block_keys // 2  # the last prompt is 7 tokens shorter
    inputs, written = written_inputs(2, repeats, 4, 1, capacity=capacity, width=width)
    written.lengths.fill_(capacity)
    suffix_mask = torch.zeros_like(inputs[6])  # every suffix column written
    inputs = (*inputs[:6], suffix_mask, *inputs[7:])
    torch.testing.assert_close(packed_call(inputs, written, 1).double(), concatenated(*inputs), atol=2e-6, rtol=1e-5)


@needs_interpreter
@pytest.mark.parametrize("repeats", [1, 3], ids=["one-candidate", "several-candidates"])
def test_prefix_chunks_loaded_by_tensor_descriptors_are_the_pointer_loads_bit_for_bit(repeats, monkeypatch):
    """Where TMA runs (Triton's interpreter here) the chunks' keys and values come through tensor descriptors of the
    packed prefix, one per call, in blocks of the launch's keys; a block past a chunk's end reads the next chunk's keys
    (hidden) or zeros past the table. Without TMA (`tma=False`) the same chunks load by pointers."""
    block_keys = triton_split.partials_launch(2, repeats, 16)[0]
    inputs, written = written_inputs(2, repeats, 4, 1, width=5 * block_keys // 2 + 7)
    arguments = packed_arguments(inputs, written, 2)
    assert arguments[3].tma
    made, original = [], triton_split.TensorDescriptor

    class Recorded:
        @staticmethod
        def from_tensor(tensor, block_shape):
            made.append((tensor.shape, block_shape))
            return original.from_tensor(tensor, block_shape)

    monkeypatch.setattr(triton_split, "TensorDescriptor", Recorded)
    described = split_triton_attention(*arguments)
    tokens, kv_heads, head_dim = arguments[1].shape
    assert made == [((tokens, kv_heads * head_dim), [block_keys, head_dim])] * 2
    by_pointers = (*arguments[:3], dataclasses.replace(arguments[3], tma=False), *arguments[4:])
    assert torch.equal(split_triton_attention(*by_pointers), described) and len(made) == 2
    torch.testing.assert_close(described.double(), concatenated(*inputs), atol=2e-6, rtol=1e-5)


def test_the_suffix_mask_alone_is_refused_and_so_are_odd_head_dims():
    inputs, written = written_inputs(1, 2, 2, 1)
    per_row, prefix_keys, prefix_values, prefix_bias, key, value, suffix_mask, scale, repeats = inputs
    attention = (prefix_bias[:, 0, 0] == 0).long()
    chunks, tokens = prefix_chunks(attention, 2), prompt_tokens(attention)
    packed = pack_prefix(prefix_keys, tokens), pack_prefix(prefix_values, tokens)
    with pytest.raises(ValueError, match="prefix_attention='split_triton' reads each row's written suffix columns"):
        split_triton_attention(per_row, *packed, chunks, key, value, suffix_mask, scale, repeats)
    with pytest.raises(ValueError, match="power of two >= 16; got 12"):
        split_triton_attention(per_row[..., :12], *packed, chunks, key, value, None, scale, repeats, written)
    with pytest.raises(ValueError, match="the queries' head dim must be contiguous"):
        column_major = per_row.transpose(-1, -2).contiguous().transpose(-1, -2)
        split_triton_attention(column_major, *packed, chunks, key, value, None, scale, repeats, written)
    with pytest.raises(ValueError, match=r"2 query rows for 1 prompt\(s\) x 1 candidates"):
        split_triton_attention(per_row, *packed, chunks, key, value, None, scale, 1, written)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the compiled Triton kernels need CUDA")
@pytest.mark.parametrize("prompts,repeats,per_kv,positions", [(1, 20, 4, 1), (1, 1, 4, 1), (2, 4, 4, 8), (10, 4, 4, 1)],
                         ids=["k20", "k1", "jump", "magrpo"])
def test_the_compiled_kernels_on_cuda_match_the_joint_softmax(prompts, repeats, per_kv, positions):
    inputs, written = written_inputs(prompts, repeats, per_kv, positions, "cuda", torch.bfloat16, capacity=256,
                                     width=3000, dim=128)
    expected = concatenated(*inputs)
    arguments = packed_arguments(inputs, written)
    got = split_triton_attention(*arguments)
    triton_error = (got.double() - expected).abs().max().item()
    joint_error = (joint_softmax_attention(*inputs).double() - expected).abs().max().item()
    assert triton_error <= max(2 * joint_error, 1e-2)
    assert torch.equal(split_triton_attention(*arguments), got)  # the next layer's call: the same output again
    attention = torch.ones((prompts, 3000), dtype=torch.long, device="cuda")
    processors = torch.cuda.get_device_properties(0).multi_processor_count
    wanted = processors // 8 if prompts == 1 else -(-2 * processors // (prompts * 8))  # one wave for one prompt
    assert prefix_chunks(attention, 8, one_wave=True).per_prompt == min(wanted, 3000 // 256)
