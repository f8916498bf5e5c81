"""Preference collection and pair selection: ties, gap order, comparator order, 6 kept, exact tokens."""

from dataclasses import dataclass

import pytest

from tests.fixtures import all_dash_action_text, fixture_raw, role_action_text, valid_plan_values
from travel.algorithms.preference.batch import COMPARATOR, TARGET, CandidateRef, PreferenceBatch, PreferenceError
from travel.algorithms.preference.collection import (
    PreferenceSettings,
    PolicySource,
    collect_preferences,
    generation_chunks,
    select_comparator_reward,
    select_pairs,
    select_reward_gap,
)
from travel.data.normalise import normalise_row

T, C = CandidateRef(TARGET, 0).pool, CandidateRef(COMPARATOR, 0).pool


# ---- selection rules (expected orders worked out by hand) -----------------------------------------


def test_reward_gap_orders_by_gap_and_ties_give_no_pair():
    rewards = [0.1, 0.5, 0.5, 0.0]
    # ordered pairs with r_w > r_l: (1,0) .4, (1,3) .5, (2,0) .4, (2,3) .5, (0,3) .1; 1 vs 2 is a tie
    assert select_reward_gap(rewards, 10) == [(1, 3), (2, 3), (1, 0), (2, 0), (0, 3)]
    assert select_reward_gap(rewards, 2) == [(1, 3), (2, 3)]
    assert select_reward_gap([0.3, 0.3, 0.3], 6) == []


def test_reward_gap_keeps_the_six_widest_gaps():
    rewards = [i / 10 for i in range(20)]
    pairs = select_reward_gap(rewards, 6)
    assert len(pairs) == 6
    # widest gap 1.9 = (19, 0); then 1.8 twice: (18, 0), (19, 1); then 1.7 three times
    assert pairs == [(19, 0), (18, 0), (19, 1), (17, 0), (18, 1), (19, 2)]


def test_comparator_reward_compares_index_wise_and_orders_by_comparator_reward_then_gap():
    target = [0.2, 0.5, 0.1, 0.3, 0.9]
    comparator = [0.2, 0.1, 0.4, 0.1, 0.6]
    pairs = select_comparator_reward(target, comparator, 6)
    # i0 ties; i4 comparator reward .6; i2 .4 (comparator wins); i1 and i3 both .1, gap .4 before .2
    as_tuples = [((w.pool, w.index), (lose.pool, lose.index)) for w, lose in pairs]
    assert as_tuples == [
        ((T, 4), (C, 4)),
        ((C, 2), (T, 2)),
        ((T, 1), (C, 1)),
        ((T, 3), (C, 3)),
    ]
    assert len(select_comparator_reward(target, comparator, 2)) == 2


def test_select_pairs_checks_its_options():
    with pytest.raises(PreferenceError, match="pair_selection='best'"):
        select_pairs("best", [1.0, 0.0], [], 6)
    with pytest.raises(PreferenceError, match="preference_pairs_per_sample=0"):
        select_pairs("reward_gap", [1.0, 0.0], [], 0)
    with pytest.raises(PreferenceError, match="comparator candidates"):
        select_pairs("comparator_reward", [1.0, 0.0], [], 6)


def test_generation_chunks():
    assert generation_chunks(20, 20) == [20]
    assert generation_chunks(20, 8) == [8, 8, 4]
    assert generation_chunks(5, 2) == [2, 2, 1]
    with pytest.raises(PreferenceError, match="preference_generation_batch_size=0"):
        generation_chunks(20, 0)


# ---- collection through scripted role policies ----------------------------------------------------


@dataclass
class Scripted:
    text: str
    token_ids: list
    value_mask: list


class ScriptedPolicy:
    """Hands out a fixed list of candidates in order and records the size of every generation call."""

    def __init__(self, agent_id, candidates, prompt=(7, 8, 9)):
        self.agent_id = agent_id
        self.candidates = list(candidates)
        self.calls = []
        self.prompt = prompt

    def prompt_ids(self, row):
        return list(self.prompt)

    def sample(self, row, num_candidates, *, greedy=False):
        assert not greedy
        self.calls.append(num_candidates)
        out, self.candidates = self.candidates[:num_candidates], self.candidates[num_candidates:]
        return out


def row_from(**overrides):
    return normalise_row(fixture_raw(**overrides), 0)


def texts_for(row):
    plan = valid_plan_values(row)
    return {
        "valid": (role_action_text(0, plan, row.days), role_action_text(1, plan, row.days)),
        "dash": (all_dash_action_text(0, row.days), all_dash_action_text(1, row.days)),
        "junk": ('{"agent_id": 0, "assignments": [', "not json"),
    }


def scripted(row, kinds, token_base):
    """Two role policies whose candidate k has the texts of kinds[k] and unique tokens token_base + 10k + agent."""
    texts = texts_for(row)
    roles = []
    for agent in range(2):
        roles.append(
            ScriptedPolicy(
                agent,
                [
                    Scripted(
                        texts[kind][agent], [token_base + 10 * k + agent, 5, token_base + 10 * k + agent + 1], [1, 0, 1]
                    )
                    for k, kind in enumerate(kinds)
                ],
            )
        )
    return roles


def test_reward_gap_collection_keeps_exact_tokens_of_both_roles_and_prompt_ids_once():
    row = row_from()
    policies = scripted(row, ["dash", "valid", "junk", "valid"], 100)
    source = PolicySource(policies, batch_size=3)
    collection = collect_preferences([row], source, PreferenceSettings(4, 0, 6, "reward_gap"))
    assert [p.calls for p in policies] == [[3, 1], [3, 1]]
    batch = collection.batch
    # rewards: valid 1.0 (twice, tied with each other), dash 0.08, junk ~0.0006 -> five ordered pairs
    assert [(p.winner_ref.index, p.loser_ref.index) for p in batch] == [(1, 2), (3, 2), (1, 0), (3, 0), (0, 2)]
    first = batch.pairs[0]
    assert first.winner_reward == 1.0 and first.loser_reward < 0.01
    for agent in range(2):
        assert first.winner.sequences[agent].ids == (110 + agent, 5, 111 + agent)  # candidate 1, final token kept
        assert first.loser.sequences[agent].ids == (120 + agent, 5, 121 + agent)
        assert first.winner.sequences[agent].mask == (1, 0, 1)
        assert batch.prompt_ids(first, agent) == (7, 8, 9)
    assert first.winner.texts == texts_for(row)["valid"]
    assert list(batch.prompts) == [row.source_index]
    assert collection.collected_candidates == 4 and len(collection.target_rewards) == 4
    assert first.candidate_mean == pytest.approx(sum(collection.target_rewards) / 4)


def test_identical_texts_stay_distinct_candidates_keyed_by_index():
    row = row_from()
    policies = scripted(row, ["valid", "valid", "dash"], 200)
    batch = collect_preferences(
        [row], PolicySource(policies, 20), PreferenceSettings(3, 0, 6, "reward_gap")
    ).batch
    assert [(p.winner_ref.index, p.loser_ref.index) for p in batch] == [(0, 2), (1, 2)]
    assert batch.pairs[0].winner.sequences[0].ids != batch.pairs[1].winner.sequences[0].ids


def test_comparator_collection_pairs_target_with_comparator():
    row = row_from()
    target = PolicySource(scripted(row, ["valid", "dash", "junk"], 300), 20)
    comparator = PolicySource(scripted(row, ["dash", "dash", "valid"], 400), 20)
    collection = collect_preferences(
        [row], target, PreferenceSettings(3, 3, 6, "comparator_reward"), comparator=comparator, iteration=2
    )
    pairs = collection.batch.pairs
    assert [((p.winner_ref.pool, p.winner_ref.index), (p.loser_ref.pool, p.loser_ref.index)) for p in pairs] == [
        ((C, 2), (T, 2)),  # comparator reward 1.0
        ((T, 0), (C, 0)),  # comparator reward 0.08; index 1 ties (dash vs dash)
    ]
    assert pairs[0].winner.sequences[1].ids == (400 + 20 + 1, 5, 400 + 20 + 2)
    assert pairs[0].iteration == 2 and collection.collected_candidates == 6
    assert len(collection.comparator_rewards) == 3


def test_all_tied_rows_give_no_pairs_and_are_reported():
    row = row_from()
    collection = collect_preferences(
        [row], PolicySource(scripted(row, ["dash"] * 4, 0), 20), PreferenceSettings(4, 0, 6, "reward_gap")
    )
    assert len(collection.batch) == 0 and collection.rows_without_pairs == (row.source_index,)


def test_a_short_generation_call_or_a_bad_mask_is_named():
    row = row_from()
    policies = scripted(row, ["dash", "valid"], 0)
    with pytest.raises(PreferenceError, match="returned 2 candidates, expected 3"):
        collect_preferences([row], PolicySource(policies, 20), PreferenceSettings(3, 0, 6, "reward_gap"))
    policies = scripted(row, ["dash", "valid"], 0)
    policies[1].candidates[1].value_mask = [1, 0]
    with pytest.raises(PreferenceError, match="candidate 1, agent 1: value mask has 2 entries for 3 tokens"):
        collect_preferences([row], PolicySource(policies, 20), PreferenceSettings(2, 0, 6, "reward_gap"))


def test_no_annotated_plan_reaches_any_label():
    """The same candidates under rows whose annotated plans differ (one equal to a candidate) give the same pairs."""
    base = fixture_raw()
    plan = valid_plan_values(normalise_row(base, 0))
    other = [dict(day, breakfast="-", lunch="-", dinner="-", attraction="-") for day in plan]
    batches = []
    for annotated in (plan, other):
        row = row_from(annotated_plan=repr(annotated), gold_plan=repr(annotated))
        source = PolicySource(scripted(row, ["dash", "valid", "junk", "dash"], 500), 20)
        batches.append(collect_preferences([row], source, PreferenceSettings(4, 0, 6, "reward_gap")).batch)
    summary = [[(p.winner_ref, p.loser_ref, p.winner_reward, p.loser_reward) for p in b] for b in batches]
    assert summary[0] == summary[1] and len(summary[0]) == 5


def test_batches_combine_split_and_refuse_mixed_kinds():
    row = row_from()
    batch = collect_preferences(
        [row],
        PolicySource(scripted(row, ["dash", "valid", "junk"], 0), 20),
        PreferenceSettings(3, 0, 6, "reward_gap"),
    ).batch
    assert [len(b) for b in batch.minibatches(2)] == [2, 1]
    both = PreferenceBatch.concat([batch, batch])
    assert len(both) == 6 and both.prompts == batch.prompts
    with pytest.raises(PreferenceError, match="kinds"):
        PreferenceBatch.concat([batch, PreferenceBatch("centralized_joint")])
    with pytest.raises(PreferenceError, match="2 token sequences for a centralized_joint batch"):
        PreferenceBatch("centralized_joint", batch.pairs, batch.prompts)
