"""generation.values=catalog: every value is one its slot admits, under every step backend and seed."""

from __future__ import annotations

import json

import pytest

from tests.fixtures import fixture_row
from tests.generation.conftest import assert_strict_action, short_request
from travel.data.normalise import normalise_row
from travel.data.synthetic import SyntheticSource
from travel.generation import StructuredDecoder, role_request
from travel.generation.value_trie import CatalogValueError, ValueTrie, value_token_ids
from travel.generation.value_vocab import value_tables
from travel.task.value_options import EMPTY_VALUE, field_value_options, slot_value_options


def catalog_decoder(tiny, **options) -> StructuredDecoder:
    return StructuredDecoder(tiny.model, tiny.tokenizer, max_new_tokens=700, values="catalog", **options)


def values_of(candidate) -> list[str]:
    return [assignment["value"] for assignment in json.loads(candidate.text)["assignments"]]


@pytest.fixture(scope="module")
def synthetic_row():
    return normalise_row(SyntheticSource(seed=0, num_rows=3).load_raw()[0], 0)


def test_value_options_list_the_prompt_catalog_values_and_the_empty_value(tiny, synthetic_row):
    options = field_value_options(synthetic_row)
    assert all(values[-1] == EMPTY_VALUE for values in options.values())
    assert options["breakfast"] is options["dinner"]
    assert options["current_city"][:-1] == tuple(dict.fromkeys(leg.current_city for leg in synthetic_row.scaffold))
    prompt = role_request(tiny.tokenizer, synthetic_row, 1).prompt
    for value in options["attraction"][:-1] + options["lunch"][:-1]:
        assert json.dumps(value) in prompt  # the prompt's catalog lines quote the exact value
    slots = slot_value_options(synthetic_row, 0)
    assert len(slots) == 3 * synthetic_row.days and slots[1] is options["transportation"]


@pytest.mark.parametrize("greedy", [True, False])
def test_every_value_is_one_its_slot_admits_for_both_roles(tiny, synthetic_row, greedy):
    decoder = catalog_decoder(tiny)
    rows = [fixture_row(), synthetic_row]
    requests = [role_request(tiny.tokenizer, row, agent, values="catalog") for row in rows for agent in (0, 1)]
    groups = decoder.generate(requests, 1 if greedy else 6, greedy=greedy, seeds=None if greedy else [3] * 4)
    distinct = set()
    for request, group in zip(requests, groups):
        for candidate in group:
            values = assert_strict_action(candidate.text, request.agent_id, request.days)
            assert all(value in admitted for value, admitted in zip(values, request.slot_values))
            distinct.add(tuple(values))
            # every value token, the closing quote included, is the policy's; the schema is forced
            quote = tiny.tokenizer.encode('"', add_special_tokens=False)[0]
            sampled = candidate.token_ids[candidate.value_mask].tolist()
            assert sampled.count(quote) == len(values)
    if not greedy:
        assert len(distinct) > 12  # sampling explores the catalog


def test_static_steps_sample_the_same_catalog_values_as_the_eager_loop(tiny, synthetic_row):
    requests = [role_request(tiny.tokenizer, synthetic_row, agent, values="catalog") for agent in (0, 1)]
    results = {}
    for backend, sharing in (("eager", "never"), ("static", "never"), ("static", "always")):
        decoder = catalog_decoder(tiny, step_backend=backend, share_prompt_cache=sharing)
        groups = decoder.generate(requests, 3, seeds=[11, 12], return_logprobs=True)
        results[backend, sharing] = [(c.token_ids.tolist(), round(c.logprob, 4)) for g in groups for c in g]
    assert results["eager", "never"] == results["static", "never"] == results["static", "always"]


def test_a_catalog_request_without_slot_values_fails_naming_the_option(tiny):
    decoder = catalog_decoder(tiny)
    with pytest.raises(ValueError, match="generation.values=catalog"):
        decoder.generate([short_request(tiny.tokenizer, 0, 3)], 1, greedy=True)
    with pytest.raises(ValueError, match="generation.values='text'"):
        StructuredDecoder(tiny.model, tiny.tokenizer, values="text")


def test_the_trie_escapes_quotes_drops_unwritable_values_and_shares_prefixes(tiny):
    tables = value_tables(tiny.tokenizer, tiny.model.config.vocab_size)
    trie = ValueTrie.build(tiny.tokenizer, ['Say "Hi", Beta', "Cafe, Beta", "Cafe, Beta Annex", "-"], tables)
    assert trie.values == ('Say "Hi", Beta', "Cafe, Beta", "Cafe, Beta Annex", "-")
    assert sum(trie.terminal) == 4
    assert len(trie.children[0]) == 3  # "Cafe, Beta" and its annex share their first token
    quoted = value_token_ids(tiny.tokenizer, 'Say "Hi", Beta', tables)
    assert tiny.tokenizer.decode(list(quoted)) == 'Say \\"Hi\\", Beta'
    assert value_token_ids(tiny.tokenizer, "", tables) is None
    with pytest.raises(CatalogValueError, match="none of the slot's values"):
        ValueTrie.build(tiny.tokenizer, [""], tables)


def test_catalog_values_survive_a_budget_forced_close(tiny, synthetic_row):
    """With too small a token budget the decoder still ends every action strictly (the forced fallback)."""
    request = role_request(tiny.tokenizer, synthetic_row, 0, values="catalog")
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, max_new_tokens=180, values="catalog")
    for candidate in decoder.generate([request], 4, seeds=[5])[0]:
        assert_strict_action(candidate.text, 0, request.days)
        assert len(candidate.token_ids) <= 180
