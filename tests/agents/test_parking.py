"""Parking an actor in host memory: everything comes back bit for bit, training continues as if it never
moved, tied weights stay tied, and the host tensors are reused."""

from __future__ import annotations

import pytest
import torch

from travel.agents.layouts import build_layout
from travel.agents.models import build_tiny_random
from travel.agents.parking import HostStash, actor_slots, park, unpark


def _trained_actor(seed: int = 0):
    """A tiny model with AdamW state from one step and fresh grads from a second backward."""
    loaded = build_tiny_random(seed=seed)
    model = loaded.model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.arange(1, 9).reshape(1, -1)
    for _ in range(2):
        optimizer.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()
        if not optimizer.state:
            optimizer.step()
    return model, optimizer


def _snapshot(model, optimizer):
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    buffers = {name: b.clone() for name, b in model.named_buffers()}
    state = [{k: v.clone() for k, v in s.items()} for s in optimizer.state.values()]
    return params, grads, buffers, state


def _assert_same(before, after):
    for old, new in zip(before, after):
        if isinstance(old, dict):
            assert old.keys() == new.keys()
            for key in old:
                assert torch.equal(old[key], new[key]), key
        else:
            assert len(old) == len(new)
            for a, b in zip(old, new):
                _assert_same([a], [b])


def test_park_and_unpark_restore_every_tensor_and_training_continues_identically():
    model, optimizer = _trained_actor()
    reference, reference_optimizer = _trained_actor()
    before = _snapshot(model, optimizer)
    embed, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    assert embed is head  # the tiny model ties its embeddings
    pointers = {name: p.data_ptr() for name, p in model.named_parameters()}

    stash = HostStash(pin=False)
    parked = park(model, optimizer, stash)
    assert all(p.data_ptr() != pointers[name] for name, p in model.named_parameters())  # now the stash's tensors
    assert model.get_input_embeddings().weight is model.get_output_embeddings().weight
    _assert_same(before, _snapshot(model, optimizer))
    assert set(optimizer.state) == set(model.parameters())  # state still keyed by the same parameter objects

    unpark(parked, stash)
    _assert_same(before, _snapshot(model, optimizer))
    optimizer.step()
    reference_optimizer.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert torch.equal(p, q), name


def test_the_stash_allocates_once_and_hands_the_same_host_tensors_out_again():
    model, optimizer = _trained_actor()
    stash = HostStash(pin=False)
    first = park(model, optimizer, stash)
    allocated = stash.allocated_bytes
    slots = actor_slots(model, optimizer)
    expected = sum(t.numel() * t.element_size() for t in (slot.get() for slot in slots) if t is not None)
    assert allocated == expected
    hosts = {id(host) for _, host in first.slots}
    unpark(first, stash)
    second = park(model, optimizer, stash)
    assert stash.allocated_bytes == allocated
    assert {id(host) for _, host in second.slots} == hosts
    unpark(second, stash)


def test_unparked_tensors_do_not_alias_the_stash_so_the_next_park_cannot_overwrite_them():
    model, optimizer = _trained_actor()
    stash = HostStash(pin=False)
    parked = park(model, optimizer, stash)
    hosts = [host for _, host in parked.slots]
    unpark(parked, stash)
    host_pointers = {host.data_ptr() for host in hosts}
    live = [slot.get() for slot in actor_slots(model, optimizer)]  # data, grads, buffers, optimizer state
    assert not any(t.data_ptr() in host_pointers for t in live if t is not None)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where pinned memory cannot be allocated")
def test_without_pinned_memory_the_stash_warns_once_and_parks_in_pageable_memory():
    model, optimizer = _trained_actor()
    before = _snapshot(model, optimizer)
    stash = HostStash(pin=True)  # no CUDA here: the pinned allocator is missing, as when page-locked RAM runs out
    with pytest.warns(UserWarning, match="pinned host memory is unavailable after 0.0 GiB") as caught:
        parked = park(model, optimizer, stash)
    assert len(caught) == 1 and not stash.pin
    assert not any(host.is_pinned() for _, host in parked.slots)
    unpark(parked, stash)
    _assert_same(before, _snapshot(model, optimizer))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinned parking moves a GPU actor")
def test_a_gpu_actor_parks_in_pinned_memory_frees_the_gpu_and_comes_back_unchanged():
    hardware = {"agent_devices": ["cuda:0", "cuda:0"], "parallel_training": "none", "offload_inactive_actor": True}
    generation = {"max_new_tokens": 64, "max_value_tokens": 2, "temperature": 0.7, "top_p": 0.8}
    actors = build_layout(build_tiny_random, hardware, generation, learning_rate=2e-5, seed=0)
    actor = actors[0]
    ids = torch.arange(1, 9, device="cuda").reshape(1, -1)
    actor.model(input_ids=ids, labels=ids).loss.backward()
    actor.optimizer.step()
    before = _snapshot(actor.model, actor.optimizer)
    allocated = torch.cuda.memory_allocated()
    actor.to("cpu")
    assert all(p.device.type == "cpu" and p.is_pinned() for p in actor.model.parameters())
    assert torch.cuda.memory_allocated() < allocated
    actor.to(actor.device)
    assert all(p.device == torch.device("cuda", 0) for p in actor.model.parameters())
    _assert_same(before, _snapshot(actor.model, actor.optimizer))
    assert actor.stash is actors[1].stash
