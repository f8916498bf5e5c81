"""Catalog-restricted values (`generation.values=catalog`): a token trie per slot over the values it admits.

Each admitted value is tokenized once as JSON string content (escaped, without quotes) and kept only if
its tokens read as a plain string from the normal escape state (no token may close the value early) and
decode back to exactly that content. The tries of one decode call are laid out as device tensors: for
every node its children's tokens and node ids (padded with an id past the vocabulary), whether a value
ends there, and each row's root node per slot. In a value the policy may sample a child token of its
node, or the closing quote where a value ends; the decoder's string state (escapes, visible content)
is tracked as for free text, so the action text, value masks and log-probs keep their meaning.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from travel.generation.value_vocab import NORMAL, ValueTables

DEAD_NODE = 0  # no children and no value end: the root of a padded slot


class CatalogValueError(ValueError):
    """A slot admits no value the tokenizer can write (generation.values=catalog)."""


def _decode(tokenizer: Any, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


def close_token_id(tokenizer: Any, tables: ValueTables) -> int:
    """The single token `"` that closes a value from the normal string state."""
    ids = tokenizer.encode('"', add_special_tokens=False)
    if len(ids) != 1 or not bool(tables.closes[NORMAL, ids[0]]):
        raise CatalogValueError(f'generation.values=catalog needs a single-token closing quote; `"` encodes to {ids}')
    return int(ids[0])


def value_token_ids(tokenizer: Any, value: str, tables: ValueTables) -> tuple[int, ...] | None:
    """The tokens of `value` as JSON string content, or None when they cannot be decoded as one value."""
    content = json.dumps(value, ensure_ascii=False)[1:-1]
    ids = tuple(int(i) for i in tokenizer.encode(content, add_special_tokens=False))
    if not ids or _decode(tokenizer, ids) != content:
        return None
    state = NORMAL
    for token in ids:
        if token >= tables.vocab_size or bool(tables.closes[state, token]):
            return None
        state = int(tables.next_state[state, token])
        if state < 0:
            return None
    return ids if state == NORMAL else None


@dataclass(frozen=True)
class ValueTrie:
    """The token trie of one slot's admitted values; node 0 is the root."""

    children: tuple[dict[int, int], ...]
    terminal: tuple[bool, ...]
    values: tuple[str, ...]  # the admitted values the tokenizer can write, in the given order

    @classmethod
    def build(cls, tokenizer: Any, values: Sequence[str], tables: ValueTables) -> ValueTrie:
        children: list[dict[int, int]] = [{}]
        terminal = [False]
        kept = []
        for value in values:
            ids = value_token_ids(tokenizer, value, tables)
            if ids is None:
                continue
            kept.append(value)
            node = 0
            for token in ids:
                if token not in children[node]:
                    children[node][token] = len(children)
                    children.append({})
                    terminal.append(False)
                node = children[node][token]
            terminal[node] = True
        if not kept:
            raise CatalogValueError(f"generation.values=catalog: none of the slot's values {list(values)[:5]} can be written")
        return cls(tuple(children), tuple(terminal), tuple(kept))


@dataclass(frozen=True)
class CatalogTables:
    """The tries of one decode call as device tensors (rows grouped by request, K rows per request)."""

    child_tokens: torch.Tensor  # (nodes, width) long; padding = vocab size
    child_nodes: torch.Tensor  # (nodes, width) long; padding = DEAD_NODE
    terminal: torch.Tensor  # (nodes,) bool
    slot_roots: torch.Tensor  # (rows, slots) long
    close_token: int
    vocab_size: int

    @classmethod
    def of(
        cls, tries: Sequence[Sequence[ValueTrie]], repeats: int, close_token: int, vocab_size: int, device: torch.device
    ) -> CatalogTables:
        """`tries[i][k]`: the trie of request i's slot k; equal tries share their nodes."""
        offsets: dict[int, int] = {}
        children: list[dict[int, int]] = [{}]
        terminal: list[bool] = [False]
        for request_tries in tries:
            for trie in request_tries:
                if id(trie) in offsets:
                    continue
                base = offsets[id(trie)] = len(children)
                children.extend({token: base + child for token, child in node.items()} for node in trie.children)
                terminal.extend(trie.terminal)
        width = max(1, max(len(node) for node in children))
        child_tokens = torch.full((len(children), width), vocab_size, dtype=torch.long)
        child_nodes = torch.full((len(children), width), DEAD_NODE, dtype=torch.long)
        for index, node in enumerate(children):
            if node:
                child_tokens[index, : len(node)] = torch.tensor(list(node.keys()))
                child_nodes[index, : len(node)] = torch.tensor(list(node.values()))
        slots = max(len(request_tries) for request_tries in tries)
        roots = torch.full((len(tries), slots), DEAD_NODE, dtype=torch.long)
        for index, request_tries in enumerate(tries):
            roots[index, : len(request_tries)] = torch.tensor([offsets[id(trie)] for trie in request_tries])
        return cls(
            child_tokens=child_tokens.to(device),
            child_nodes=child_nodes.to(device),
            terminal=torch.tensor(terminal, dtype=torch.bool, device=device),
            slot_roots=roots.repeat_interleave(repeats, dim=0).to(device),
            close_token=close_token,
            vocab_size=vocab_size,
        )

    def root(self, slot: torch.Tensor) -> torch.Tensor:
        """(rows,) the root node of each row's `slot` (a slot past a row's last one is the dead node)."""
        index = slot.clamp(max=self.slot_roots.shape[1] - 1)[:, None]
        return self.slot_roots.gather(1, index).squeeze(1)

    def legal(self, node: torch.Tensor) -> torch.Tensor:
        """(rows, vocab) bool: the child tokens of each row's node, and the closing quote where a value ends."""
        rows = node.shape[0]
        legal = torch.zeros((rows, self.vocab_size + 1), dtype=torch.bool, device=node.device)
        legal.scatter_(1, self.child_tokens[node], True)
        legal[:, self.close_token] |= self.terminal[node]
        return legal[:, : self.vocab_size]

    def advance(self, node: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
        """(rows,) the child of `node` reached by `token` (DEAD_NODE when `token` is no child's)."""
        match = self.child_tokens[node] == token[:, None]
        return (self.child_nodes[node] * match).sum(dim=1)


def checked_slot_values(requests: Sequence[Any], plans: Sequence[Any]) -> list[tuple[tuple[str, ...], ...]]:
    """Each request's admitted values per slot, checked against its plan's slot count."""
    for index, (request, plan) in enumerate(zip(requests, plans)):
        if request.slot_values is None or len(request.slot_values) != plan.num_slots:
            raise ValueError(
                f"request {index} (agent {request.agent_id}): generation.values=catalog needs the admitted values of "
                f"each of its {plan.num_slots} slots (DecodeRequest.slot_values; role_request(..., values='catalog'))"
            )
    return [request.slot_values for request in requests]


class TrieCache:
    """A decoder's tries, built once per distinct list of admitted values."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self._tries: dict[tuple[str, ...], ValueTrie] = {}

    def trie(self, values: tuple[str, ...], tables: ValueTables) -> ValueTrie:
        if values not in self._tries:
            self._tries[values] = ValueTrie.build(self.tokenizer, values, tables)
        return self._tries[values]

    def tables(
        self, slot_values: Sequence[Sequence[tuple[str, ...]]], repeats: int, tables: ValueTables, device: torch.device
    ) -> CatalogTables:
        """The tries of one decode call's slots as device tensors (`tables`: the host value tables)."""
        tries = [[self.trie(tuple(values), tables) for values in request_values] for request_values in slot_values]
        close = close_token_id(self.tokenizer, tables)
        return CatalogTables.of(tries, repeats, close, tables.vocab_size, device)
