"""Joint DPO: the objective, the streamed gradient against full-loss autograd, the update, and the dropout guard."""

import copy
import math
from types import SimpleNamespace

import pytest
import torch

from travel.agents.models import build_tiny_random, tiny_random_config
from travel.algorithms.preference.dpo import (
    DropoutError,
    accumulate_role_gradients,
    check_zero_dropout,
    joint_dpo_loss,
    joint_dpo_update,
    one_by_one,
    packed_logprobs,
    pair_coefficients,
    role_logprobs,
)
from travel.algorithms.preference.batch import (
    CENTRALIZED_JOINT,
    DECENTRALIZED,
    TARGET,
    CandidateRef,
    JointCandidate,
    PreferenceBatch,
    PreferencePair,
    TokenSequence,
)

torch.set_num_threads(1)  # tiny models: thread start-up costs more than the matmuls on a shared 2-core machine
BETA = 0.1


def reference_logprob(model, prompt_ids, ids, mask, device):
    """docs/algorithms.md "Value-token loss" written out: one prediction per continuation token (the final one
    included), full-vocabulary log-softmax at temperature 1, mean over the value tokens (mask 1)."""
    full = torch.tensor([list(prompt_ids) + list(ids)], device=device)
    logits = model(input_ids=full).logits[0].float()
    start = len(prompt_ids) - 1
    predictions = logits[start : start + len(ids)]
    chosen = torch.log_softmax(predictions, dim=-1).gather(1, torch.tensor(list(ids), device=device)[:, None]).squeeze(1)
    selected = torch.tensor(list(mask), dtype=torch.bool, device=device)
    return chosen[selected].sum() / selected.sum()


written_out = one_by_one(reference_logprob)  # each continuation as its own sequence


def sequence(generator, length, vocab=300):
    ids = torch.randint(5, vocab, (length,), generator=generator).tolist()
    mask = [1 if torch.rand((), generator=generator) < 0.6 else 0 for _ in range(length)]
    mask[-1] = 1  # the final value token is scored
    mask[0] = 1
    return TokenSequence.of(ids, mask, "test")


def preference_batch(num_pairs=3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    prompts = {row: tuple(tuple(torch.randint(5, 300, (6 + row + agent,), generator=generator).tolist()) for agent in range(2)) for row in range(2)}
    pairs = []
    for number in range(num_pairs):
        sides = [JointCandidate(("a", "b"), (sequence(generator, 5 + number), sequence(generator, 4 + 2 * number))) for _ in range(2)]
        pairs.append(
            PreferencePair(
                row_index=number % 2,
                winner_ref=CandidateRef(TARGET, 2 * number),
                loser_ref=CandidateRef(TARGET, 2 * number + 1),
                winner=sides[0],
                loser=sides[1],
                winner_reward=0.5,
                loser_reward=0.1,
                candidate_mean=0.3,
            )
        )
    return PreferenceBatch(DECENTRALIZED, tuple(pairs), prompts)


class Group:
    """The part of travel.agents.layouts.PolicyLayout joint DPO uses."""

    def __init__(self, actors):
        self.actors = tuple(actors)
        self.calls = 0

    def update_each(self, step):
        self.calls += 1
        return [step(actor) for actor in self.actors]


def actor(agent_id, seed, lr=1e-2, optimizer=torch.optim.AdamW):
    model = build_tiny_random(seed=seed).model
    return SimpleNamespace(agent_id=agent_id, model=model, optimizer=optimizer(model.parameters(), lr=lr))


def full_loss(models, batch, logprob=reference_logprob):
    deltas = torch.stack(
        [
            torch.stack(
                [
                    logprob(models[r], batch.prompt_ids(pair, r), pair.winner.sequences[r].ids, pair.winner.sequences[r].mask, "cpu")
                    - logprob(models[r], batch.prompt_ids(pair, r), pair.loser.sequences[r].ids, pair.loser.sequences[r].mask, "cpu")
                    for r in range(2)
                ]
            )
            for pair in batch
        ]
    )
    return joint_dpo_loss(deltas, BETA)


def test_loss_and_coefficients_follow_their_formulas():
    deltas = torch.tensor([[1.0, 2.0], [-3.0, 0.5]])
    expected = (math.log1p(math.exp(-0.1 * 3.0)) + math.log1p(math.exp(0.1 * 2.5))) / 2
    assert float(joint_dpo_loss(deltas, 0.1)) == pytest.approx(expected, rel=1e-6)
    assert pair_coefficients([3.0, -2.5], 0.1) == pytest.approx([-0.1 / (1 + math.exp(0.3)) / 2, -0.1 / (1 + math.exp(-0.25)) / 2])
    # the coefficient is the loss's derivative with respect to a pair's delta
    joint = torch.tensor([3.0, -2.5], requires_grad=True)
    joint_dpo_loss(joint[:, None], 0.1).backward()
    assert joint.grad.tolist() == pytest.approx(pair_coefficients([3.0, -2.5], 0.1))


@pytest.mark.parametrize("logprob", [written_out, packed_logprobs], ids=["written-out", "packed"])
def test_streamed_gradient_equals_the_full_loss_gradient(logprob):
    batch = preference_batch()
    models = [build_tiny_random(seed=11).model, build_tiny_random(seed=12).model]
    full_loss(models, batch).backward()  # every sequence on its own, as written out
    expected = [[p.grad.clone() for p in m.parameters()] for m in models]
    for m in models:
        m.zero_grad(set_to_none=True)

    per_role = [role_logprobs(models[r], batch, r, logprob) for r in range(2)]
    joint = [sum(w - l for w, l in (per_role[r][i] for r in range(2))) for i in range(len(batch))]
    coefficients = pair_coefficients(joint, BETA)
    for r in range(2):
        accumulate_role_gradients(models[r], batch, r, coefficients, logprob)
    for r, model in enumerate(models):
        for (name, parameter), reference in zip(model.named_parameters(), expected[r]):
            torch.testing.assert_close(parameter.grad, reference, rtol=1e-5, atol=1e-8, msg=f"agent {r} {name}")
    assert any(float(p.grad.abs().sum()) > 0 for p in models[0].parameters())


def test_one_update_equals_an_optimizer_step_on_the_full_loss():
    # SGD: Adam's per-coordinate normalisation would blow float rounding in near-zero gradients up to lr
    batch = preference_batch(num_pairs=4, seed=3)
    streamed = Group([actor(0, 21, lr=0.5, optimizer=torch.optim.SGD), actor(1, 22, lr=0.5, optimizer=torch.optim.SGD)])
    reference = [copy.deepcopy(a.model) for a in streamed.actors]
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.5) for m in reference]
    with torch.no_grad():
        loss_before = float(full_loss(reference, batch))
    full_loss(reference, batch).backward()
    norms = [float(torch.nn.utils.get_total_norm([p.grad for p in m.parameters()])) for m in reference]
    for optimizer in optimizers:
        optimizer.step()

    step = joint_dpo_update(streamed, batch, BETA, written_out)
    assert step.loss == pytest.approx(loss_before, rel=1e-5) and step.pairs == 4
    assert step.grad_norms == pytest.approx(norms, rel=1e-4)  # logged as train/grad_norm_agent_*
    assert streamed.calls == 2  # one detached pass and one update pass, each through update_each
    for a, model in zip(streamed.actors, reference):
        for (name, p), q in zip(a.model.named_parameters(), model.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-7)
        assert all(p.grad is None for p in a.model.parameters())
        assert not a.model.training


def test_the_update_raises_the_joint_preference_margin():
    batch = preference_batch(num_pairs=2, seed=5)
    group = Group([actor(0, 31, lr=5e-3), actor(1, 32, lr=5e-3)])
    first = joint_dpo_update(group, batch, BETA, written_out)
    for _ in range(3):
        last = joint_dpo_update(group, batch, BETA, written_out)
    assert last.mean_joint_delta > first.mean_joint_delta and last.loss < first.loss


def test_active_dropout_is_refused_before_any_update():
    tokenizer_size = 64
    config = tiny_random_config(tokenizer_size, 0, 1)
    config.attention_dropout = 0.1
    from transformers import Qwen3ForCausalLM

    model = Qwen3ForCausalLM(config)
    with pytest.raises(DropoutError, match=r"agent 0: .*config.attention_dropout=0.1"):
        check_zero_dropout(model, "agent 0")
    plain = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.2))
    with pytest.raises(DropoutError, match=r"p=0\.2"):
        check_zero_dropout(plain, "agent 1")
    check_zero_dropout(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.0)), "zero dropout is fine")

    group = Group([actor(0, 41), SimpleNamespace(agent_id=1, model=model, optimizer=None)])
    before = [p.clone() for p in group.actors[0].model.parameters()]
    with pytest.raises(DropoutError):
        joint_dpo_update(group, preference_batch(), BETA, written_out)
    assert group.calls == 0
    assert all(torch.equal(a, b) for a, b in zip(before, group.actors[0].model.parameters()))


def test_the_default_likelihood_is_the_masked_mean_including_the_final_token():
    batch = preference_batch(num_pairs=3, seed=7)
    model = build_tiny_random(seed=51).model
    for role in range(2):
        torch.testing.assert_close(
            torch.tensor(role_logprobs(model, batch, role)), torch.tensor(role_logprobs(model, batch, role, written_out)), rtol=1e-5, atol=1e-6
        )
    # only the final token scored: the log-prob is that token's full-vocabulary log-softmax at the last prediction
    prompt, ids = [7, 8, 9], [20, 21, 22, 23]
    single = PreferenceBatch(
        DECENTRALIZED,
        (PreferencePair(0, CandidateRef(TARGET, 0), CandidateRef(TARGET, 1),
                        JointCandidate(("a", "b"), (TokenSequence.of(ids, [0, 0, 0, 1], "w"),) * 2),
                        JointCandidate(("a", "b"), (TokenSequence.of(ids, [1, 0, 0, 0], "l"),) * 2), 1.0, 0.0, 0.5),),
        {0: (tuple(prompt), tuple(prompt))},
    )
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + ids])).logits[0].float()
    last = float(torch.log_softmax(logits[len(prompt) + len(ids) - 2], -1)[ids[-1]])
    first = float(torch.log_softmax(logits[len(prompt) - 1], -1)[ids[0]])
    (winner, loser), = role_logprobs(model, single, 0)
    assert winner == pytest.approx(last, abs=1e-5) and loser == pytest.approx(first, abs=1e-5)


def test_a_sequence_without_value_tokens_contributes_nothing():
    batch = preference_batch(num_pairs=2, seed=9)
    pair = batch.pairs[0]
    empty = TokenSequence.of(pair.loser.sequences[1].ids, [0] * len(pair.loser.sequences[1].ids), "empty")
    masked = PreferencePair(pair.row_index, pair.winner_ref, pair.loser_ref, pair.winner,
                            JointCandidate(pair.loser.texts, (pair.loser.sequences[0], empty)), 0.5, 0.1, 0.3)
    batch = PreferenceBatch(DECENTRALIZED, (masked, batch.pairs[1]), batch.prompts)
    group = Group([actor(0, 61), actor(1, 62)])
    step = joint_dpo_update(group, batch)
    assert math.isfinite(step.loss)


def test_an_empty_batch_is_refused():
    with pytest.raises(ValueError, match="at least one pair"):
        joint_dpo_update(Group([]), PreferenceBatch(DECENTRALIZED), BETA, written_out)


def joint_batch(num_pairs=3, seed=0):
    """A batch of the joint actor's pairs: one token sequence per candidate, one prompt per row."""
    two = preference_batch(num_pairs, seed)
    pairs = tuple(
        PreferencePair(p.row_index, p.winner_ref, p.loser_ref, JointCandidate(p.winner.texts, p.winner.sequences[:1]),
                       JointCandidate(p.loser.texts, p.loser.sequences[:1]), p.winner_reward, p.loser_reward, p.candidate_mean)
        for p in two
    )
    return PreferenceBatch(CENTRALIZED_JOINT, pairs, {row: ids[:1] for row, ids in two.prompts.items()})


@pytest.mark.parametrize("logprob", [written_out, packed_logprobs], ids=["written-out", "packed"])
def test_a_single_policy_updates_in_one_pass_as_the_two_pass_update_does(logprob):
    """The joint actor's pair coefficient needs only its own delta: one pass with gradients, the same step."""
    batch = joint_batch(num_pairs=4, seed=7)
    one_pass = Group([actor(0, 41, lr=0.5, optimizer=torch.optim.SGD)])
    reference = copy.deepcopy(one_pass.actors[0].model)
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.5)
    # the two-pass form: the deltas without gradients, then the coefficients' weighted backward
    deltas = [w - l for w, l in role_logprobs(reference, batch, 0, logprob)]
    accumulate_role_gradients(reference, batch, 0, pair_coefficients(deltas, BETA), logprob)
    norm = float(torch.nn.utils.get_total_norm([p.grad for p in reference.parameters()]))
    optimizer.step()

    step = joint_dpo_update(one_pass, batch, BETA, logprob)
    assert one_pass.calls == 1  # no pass without gradients
    assert step.loss == pytest.approx(joint_dpo_loss(torch.tensor(deltas, dtype=torch.float64)[:, None], BETA).item(), rel=1e-12)
    assert step.role_deltas == (math.fsum(deltas) / len(deltas),) and step.grad_norms == pytest.approx((norm,), rel=1e-6)
    for (name, p), q in zip(one_pass.actors[0].model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-8, msg=name)
    assert any(float((p - q).detach().abs().sum()) > 0 for p, q in zip(reference.parameters(), build_tiny_random(seed=41).model.parameters()))
