"""`python launch.py experiment=smoke algorithm=X` for the four preference algorithms, end to end in subprocesses
(two at a time), on a reduced schedule: 2 train rows, one epoch (tests/preference_runs.py). Each run directory
is checked against what the run must have produced: stored pairs whose token ids are exactly the generated
continuations of the stored texts under the row's own prompt, reward distributions over the declared range
(iterative runs, each iteration), eval/* at the env steps the schedule implies, iter/* only for iterative runs, and
a console report that keeps collected candidates, pairs, replayed pairs and env steps apart (MADPO-iter runs two
iterations, the second sampling its pairs from both iterations' shards). The runs log to W&B offline,
read back from its run files: preference runs upload eval/* and iter/* only, never turn_1/*. A run in which
every comparison ties must fail."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from tests.preference_runs import ALGORITHMS, REDUCED, launch


@pytest.fixture(scope="module")
def runs(preference_smoke_runs):
    return preference_smoke_runs


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def console_report(stdout: str) -> dict[str, int]:
    """The counts of the trainer's final report: lines `  <label>   <integer>  (<unit>)`."""
    counts = {}
    for line in stdout.splitlines():
        label, _, rest = line.strip().partition("   ")
        words = rest.split()
        if label in ("collected candidates", "preference pairs", "trained pairs", "replayed pairs", "env steps") and words:
            counts[label] = int(words[0])
    return counts


def expected_dpo_eval_steps(update_env_steps: list[int], eval_every: int) -> list[int]:
    """Baseline at 0; before update u (u >= 1) when u % eval_every == 0; the terminal one after the last update."""
    before = [0, *update_env_steps[:-1]]
    return [0] + [before[u] for u in range(1, len(update_env_steps)) if u % eval_every == 0] + [update_env_steps[-1]]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_run_stores_exact_pairs_and_logs_eval_at_the_scheduled_env_steps(runs, algorithm):
    from travel.agents.offline_tokenizer import build_offline_tokenizer
    from travel.algorithms.preference.replay import ReplayStore
    from travel.data.module import DataModule
    from travel.generation import role_request
    from travel.task.roles import assistant_prefill

    run_dir, stdout = runs[algorithm]
    config = OmegaConf.load(run_dir / "config.yaml")
    assert config.algorithm.name == algorithm

    # pairs stored, with the exact generated tokens: prefill + decode(ids) is the stored action text, and the
    # prompt ids are the row's own rendered role prompt
    iterations = int(config.algorithm.get("num_iterations") or 1)
    store = ReplayStore(run_dir / "preference_replay", "decentralized")
    assert store.reload() == list(range(1, iterations + 1))
    shards = [store.load(iteration) for iteration in range(1, iterations + 1)]
    assert all(len(shard) >= 1 for shard in shards)
    tokenizer = build_offline_tokenizer()
    data = DataModule(instantiate(config.data), instantiate(config.curriculum))
    rows = {row.source_index: row for row in data.split.train}
    for pairs in shards:
        for pair in pairs:
            assert pair.winner_reward > pair.loser_reward
            for agent in (0, 1):
                request = role_request(tokenizer, rows[pair.row_index], agent)
                assert pairs.prompt_ids(pair, agent) == tuple(request.prompt_ids)
                for side in (pair.winner, pair.loser):
                    sequence = side.sequences[agent]
                    decoded = tokenizer.decode(list(sequence.ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)
                    assert side.texts[agent] == assistant_prefill(agent) + decoded and decoded.endswith("}]}")
                    assert len(sequence.mask) == len(sequence.ids) and 0 < sum(sequence.mask) < len(sequence.ids)
    shard_sizes = [len(pairs) for pairs in shards]
    stored = sum(shard_sizes)

    logged = records(run_dir)
    eval_steps = [r["env_step"] for r in logged if "eval/reward" in r]
    final = json.loads((run_dir / "eval_final.json").read_text())
    if algorithm.startswith("madpo"):
        # batches of 1 pair; each iteration trains as many pairs as it collected (replayed ones among them)
        updates = [r["env_step"] for r in logged if "train/dpo_loss" in r]
        assert updates == [config.algorithm.environment_steps_per_pair * n for n in range(1, stored + 1)]
        assert eval_steps == expected_dpo_eval_steps(updates, int(config.algorithm.eval_every_updates))
    else:
        per_epoch = len(rows) * int(config.algorithm.num_generations)
        epochs = int(config.algorithm.num_train_epochs) * iterations
        assert eval_steps == [e * per_epoch for e in range(epochs)] + [epochs * per_epoch]
        assert [r["env_step"] for r in logged if "train/reward_model_loss" in r] == [0]
    assert final["env_step"] == eval_steps[-1]

    iterative = algorithm.endswith("_iter")
    # candidates sampled per collection: the target's, and as many of the comparator's in iterative runs
    per_collection = len(rows) * int(config.algorithm.preference_num_candidates) * (2 if iterative else 1)
    iteration_records = [r for r in logged if "iter/current_iteration" in r]
    distributions = sorted(p.name for p in (run_dir / "reward_distributions").glob("*.json"))
    if iterative:
        assert [r["iter/current_iteration"] for r in iteration_records] == list(range(1, iterations + 1))
        assert [r["iter/current_preference_pairs"] for r in iteration_records] == shard_sizes
        assert [r["iter/train_preference_pairs"] for r in iteration_records] == shard_sizes
        assert distributions == [f"iteration_{i:04d}.json" for i in range(1, iterations + 1)]
        for name in distributions:
            payload = json.loads((run_dir / "reward_distributions" / name).read_text())
            assert payload["num_bins"] == 16 and len(payload["bin_edges"]) == 17
            assert [payload["reward_min"], payload["reward_max"]] == [config.reward.min_reward, config.reward.max_reward]
            assert payload["bin_edges"][0] == config.reward.min_reward and payload["bin_edges"][-1] == config.reward.max_reward
            assert payload["candidate"]["target"]["sample_count"] + payload["candidate"]["comparator"]["sample_count"] == per_collection
    else:
        assert iteration_records == [] and distributions == []

    report = console_report(stdout)
    assert report["collected candidates"] == per_collection * iterations
    assert report["preference pairs"] == stored
    assert report["trained pairs"] == stored
    # only a later iteration's training draws from an earlier shard (none with one iteration)
    assert 0 <= report["replayed pairs"] <= sum(shard_sizes[1:])
    assert report["env steps"] == eval_steps[-1]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_preference_runs_upload_eval_and_iter_metrics_only(runs, algorithm):
    from tests.logging.wandb_files import history_rows, offline_run_file, run_identity

    run_dir, _ = runs[algorithm]
    rows = history_rows(offline_run_file(run_dir))
    name, group, tags = run_identity(offline_run_file(run_dir))
    teacher = {"madpo_iter": "-history1cmp", "marlhf_iter": "-currentcmp"}.get(algorithm, "")  # the comparators
    stem = "travel-" + algorithm.replace("_", "-") + teacher
    assert name == f"{stem}-seed42-local"
    assert group == stem + ("-replay-lambda_decay0.8" if algorithm.endswith("_iter") else "")
    assert algorithm in tags and ("replay-lambda_decay0.8" in tags) == algorithm.endswith("_iter")
    uploaded = {key for row in rows for key in row if not key.startswith("_") and key != "env_step"}
    assert any(key.startswith("eval/") for key in uploaded)
    assert not {key for key in uploaded if not key.startswith(("eval/", "iter/"))}, sorted(uploaded)
    assert any(key.startswith("iter/") for key in uploaded) == algorithm.endswith("_iter")
    if algorithm.startswith("marlhf"):  # the online phase still records its turn metrics locally
        assert any("turn_1/reward_mean" in record for record in records(run_dir))


def test_a_run_in_which_every_comparison_ties_fails_explicitly(tmp_path):
    # 4-token values: the random model's actions are never grounded nor overlong, so every task reward is equal
    result = launch(tmp_path / "tied", "algorithm=madpo", *REDUCED, "generation.max_value_tokens=4", "generation.max_new_tokens=256")
    assert result.returncode != 0
    assert "no non-tied preference pairs" in result.stderr
    run_dir = tmp_path / "tied"
    assert not (run_dir / "eval_final.json").exists() and not (run_dir / "actors").exists()
    stored = json.loads((run_dir / "preference_replay" / "iteration_0001.json").read_text())
    assert stored["pairs"] == []
    assert math.isfinite(json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])["eval/reward"])
