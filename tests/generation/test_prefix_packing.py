"""The packed prefix (travel/generation/prefix_packing.py): every prompt's tokens back to back without their
padding, cut into chunks of near-equal length."""

from __future__ import annotations

import pytest
import torch

from travel.generation.prefix_packing import pack_prefix, prefix_chunks, prompt_tokens


def test_chunks_pack_each_prompts_tokens_without_padding():
    attention = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]])
    chunks = prefix_chunks(attention, kv_heads=2, per_prompt=3)
    assert chunks.offsets.tolist() == [0, 2, 4, 5, 8, 10, 12] and chunks.longest == 3 and chunks.prompts == 2
    keys = torch.arange(2 * 2 * 7 * 1).reshape(2, 2, 7, 1)  # (prompts, kv heads, width, dim)
    packed = pack_prefix(keys, prompt_tokens(attention))
    assert packed.shape == (12, 2, 1)
    assert packed[:5, 0, 0].tolist() == [2, 3, 4, 5, 6]  # prompt 0's tokens, its padding dropped
    assert packed[5:, 1, 0].tolist() == list(range(21, 28))  # prompt 1, second kv head
    assert prefix_chunks(attention, kv_heads=2).per_prompt == 1  # off a GPU one chunk per prompt
    assert prefix_chunks(attention[1:], kv_heads=2, one_wave=True).per_prompt == 1
    with pytest.raises(ValueError, match=r"per_prompt=6 must be between 1 and the shortest prompt \(5\)"):
        prefix_chunks(attention, kv_heads=2, per_prompt=6)


def test_split_triton_chunks_fill_the_processors_once_and_stop_where_its_merge_spilled():
    prompt = torch.ones((1, 6000), dtype=torch.long)
    assert prefix_chunks(prompt, kv_heads=8, one_wave=True, processors=132).per_prompt == 16  # an H200
    assert prefix_chunks(prompt, kv_heads=8, one_wave=True, processors=64).per_prompt == 8
    assert prefix_chunks(prompt, kv_heads=8, one_wave=True, processors=148).per_prompt == 16  # a B200: not 18
    assert prefix_chunks(prompt, kv_heads=3, one_wave=True, processors=132).per_prompt == 16  # SmolLM2: not 44
    assert prefix_chunks(prompt[:, :1000], kv_heads=8, one_wave=True, processors=132).per_prompt == 3  # 256-token chunks
    prompts = torch.ones((2, 6000), dtype=torch.long)
    assert prefix_chunks(prompts, kv_heads=8, processors=148).per_prompt == 19  # two waves for several prompts
    assert prefix_chunks(prompts, kv_heads=8, one_wave=True, processors=148).per_prompt == 16
