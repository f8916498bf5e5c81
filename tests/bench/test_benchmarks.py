"""The benchmark scripts run end to end on a tiny model on the CPU and print their tables."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
import torch

from bench import (
    actor_offload, decode_loop, generation, matmul_floor, measure, preference_collection, prefix_attention, train_step, update,
)
from tests.generation.conftest import short_request
from travel.agents.models import build_tiny_random
from travel.generation import StructuredDecoder


def test_generation_benchmark_times_every_method(tmp_path, capsys):
    out = tmp_path / "generation.json"
    code = generation.main(
        ["--model", "tiny_random", "--device", "cpu", "--prompt-tokens", "200", "--new-tokens", "64",
         "--candidates", "2", "--step-backends", "eager,static,static:repeated,static:shared", "--profile", "--json", str(out)]
    )
    assert code == 0  # every candidate parsed strictly
    results = json.loads(out.read_text())["results"]
    assert [result["name"] for result in results] == [
        "generate (stock)", "generate, no cuDNN SDPA", "StructuredDecoder (eager)", "StructuredDecoder (static)",
        "StructuredDecoder (static, prompt repeated)", "StructuredDecoder (static, prompt shared)",
    ]
    for result in results[2:]:  # the decoder's phases, the prefill apart from the steps, within the call
        assert list(result["phases"]) == ["weights", "prefill", "decode"] and sum(result["phases"].values()) <= result["seconds"]
        assert "the decode steps alone" in result["note"]
    table = capsys.readouterr().out
    assert "| StructuredDecoder (static) / generate (stock) |" in table
    profiled = json.loads(out.read_text())["profile"]
    assert profiled["wall_ms_per_step"] > 0 and profiled["kernel_ms_per_step"] == 0  # no GPU kernels on the CPU
    assert "profiled run (2 candidates)" in table


@pytest.mark.parametrize("draw", ["generator", "streams"])
def test_generation_benchmark_draws_as_the_trainers_do(tmp_path, draw):
    out = tmp_path / "generation.json"
    code = generation.main(
        ["--model", "tiny_random", "--device", "cpu", "--prompt-tokens", "200", "--new-tokens", "64", "--candidates", "3",
         "--baseline", "none", "--step-backends", "static", "--draw", draw, "--json", str(out)]
    )
    assert code == 0
    measured = json.loads(out.read_text())
    assert measured["draw"] == draw and f"{draw} draws" in measured["results"][0]["note"]
    # the call draws what the trainers' own calls draw: one seeded generator, or two streams splitting the candidates
    tiny = build_tiny_random(seed=0)
    decoder = StructuredDecoder(tiny.model, tiny.tokenizer, max_new_tokens=120, max_value_tokens=4)
    request = short_request(tiny.tokenizer, 1, 3)
    (drawn,) = generation.sample(decoder, request, 3, draw, 5, torch.device("cpu"))
    if draw == "generator":
        (expected,) = decoder.generate([request], 3, generator=torch.Generator().manual_seed(5))
    else:
        (first,) = decoder.generate([request], 2, generator=torch.Generator().manual_seed(5))
        (second,) = decoder.generate([request], 1, generator=torch.Generator().manual_seed(6))
        expected = first + second
    assert [c.text for c in drawn] == [c.text for c in expected]


def test_the_actions_baseline_stops_each_row_when_its_json_object_closes():
    from travel.agents.offline_tokenizer import build_offline_tokenizer
    from travel.task.roles import assistant_prefill

    tokenizer = build_offline_tokenizer()
    stop = generation.JsonActionStop(tokenizer, 2, assistant_prefill(1))
    closed = tokenizer.encode('-"}]}', add_special_tokens=False)  # the prefill opened the first value
    still_open = tokenizer.encode('-"}, {"day": 1, "field": "lunch', add_special_tokens=False)
    width = max(len(closed), len(still_open))
    padded = [ids + [tokenizer.pad_token_id] * (width - len(ids)) for ids in (closed, still_open)]
    prompt = tokenizer.encode("hi", add_special_tokens=False)[:1] * 2
    assert stop(torch.tensor([prompt + ids for ids in padded]), None).tolist() == [True, False]


def test_preference_collection_benchmark_reports_each_batch_size(tmp_path, capsys):
    out = tmp_path / "preference.json"
    code = preference_collection.main(
        ["--device", "cpu", "--batch-sizes", "2,1", "--json", str(out), "model=tiny_random", "hardware=cpu",
         "data=synthetic_short", "algorithm.preference_num_candidates=2", "generation.max_value_tokens=2"]
    )
    assert code == 0
    results = json.loads(out.read_text())["results"]
    assert [(r["batch_size"], r["generation_calls"], r["joint_candidates"]) for r in results] == [(2, 2, 2), (1, 4, 2)]
    assert all(r["seconds"] > 0 and r["pairs"] >= 0 for r in results)
    assert "| 1 vs 2 |" in capsys.readouterr().out


def test_actor_offload_benchmark_times_both_methods(tmp_path, capsys):
    out = tmp_path / "offload.json"
    assert actor_offload.main(["--device", "cpu", "--trips", "1", "--json", str(out), "model=tiny_random"]) == 0
    summary = json.loads(out.read_text())
    assert summary["bytes_per_move"] > 0 and len(summary["pageable"]) == 1 and len(summary["pinned"]) == 2
    table = capsys.readouterr().out
    assert "| pageable model.to (baseline) |" in table and "| pinned stash |" in table


def test_update_benchmark_times_every_layout_on_the_same_weights(tmp_path, capsys):
    out = tmp_path / "update.json"
    code = update.main(
        ["--device", "cpu", "--prompts", "1", "--repeats", "1", "--json", str(out), "model=tiny_random",
         "hardware=cpu", "data=synthetic_short", "generation.max_value_tokens=2", "generation.max_new_tokens=300"]
    )
    assert code == 0
    results = json.loads(out.read_text())["results"]
    assert [r["packed"] for r in results] == [False, True, True, True, True] and results[0]["loss"] != 0
    assert all(r["loss"] == pytest.approx(results[0]["loss"], rel=1e-4, abs=1e-6) for r in results)
    table = capsys.readouterr().out
    for method in ("one mask over the whole square", "one mask, prompt rows causal over the prompt", "candidates over its cache (default)"):
        assert f"| prompt packed once, {method} |" in table
    assert "| the one-mask split, decoder layers compiled (hardware.compile_update) |" in table


TRAIN_STEP_OPTIONS = {
    "magrpo": ["algorithm.rollout_buffer_size=1", "algorithm.num_generations=2"],
    "madpo_iter": ["algorithm.preference_num_candidates=2", "algorithm.preference_generation_batch_size=2",
                   "curriculum.train_per_cell=2"],
    # catalog values: the random model's candidates then differ in reward, so the comparisons give pairs to fit on
    "marlhf_iter": ["generation.values=catalog", "algorithm.preference_num_candidates=3",
                    "algorithm.preference_pairs_per_sample=1", "algorithm.preference_generation_batch_size=3",
                    "algorithm.rollout_buffer_size=1", "algorithm.num_generations=2", "curriculum.train_per_cell=2"],
}


@pytest.mark.parametrize(
    "algorithm, timed", [("magrpo", "s_per_env_step"), ("madpo_iter", "s_per_row"), ("marlhf_iter", "s_per_row")]
)
def test_train_step_benchmark_times_each_phase_and_projects_the_run(tmp_path, capsys, algorithm, timed):
    out = tmp_path / "train_step.json"
    code = train_step.main(
        ["--algorithm", algorithm, "--device", "cpu", "--json", str(out), "model=tiny_random", "hardware=cpu",
         "data=synthetic_short", "generation.max_value_tokens=2", "generation.max_new_tokens=300", *TRAIN_STEP_OPTIONS[algorithm]]
    )
    assert code == 0
    result = json.loads(out.read_text())
    phases = result[timed]
    assert phases["total"] == pytest.approx(sum(seconds for phase, seconds in phases.items() if phase != "total"))
    assert phases["generation" if algorithm == "magrpo" else "collection"] > 0 and phases["reward"] > 0
    assert result["projected_hours"] > 0
    assert "projected" in capsys.readouterr().out
    if algorithm != "magrpo":  # the paper's 60 train rows, whatever the benchmark loaded (here fewer)
        assert "60 train rows" in result["projection"] and "60 loaded" not in result["projection"]
    if algorithm == "madpo_iter":
        assert result["projected_hours"] == pytest.approx(6 * 60 * phases["total"] / 3600)  # 6 iterations
    if algorithm != "magrpo":  # the decoder calls of a collection row: per role one, target and comparator together
        profile = result["collection_profile"]
        assert profile["calls"] == 2 and profile["steps"] > 0 and profile["prefill"] > 0 and profile["decode"] > 0
        assert 0 < profile["seconds"] <= phases["collection"]
        assert profile["seconds"] + profile["outside"] == pytest.approx(phases["collection"])
    if algorithm == "marlhf_iter":
        online, model = result["s_per_env_step"], result["reward_model"]
        assert online["reward"] > 0 and online["update"] > 0 and model["fit_s_per_pair"] > 0 and model["pairs"] >= 1
        iterations, epochs, k = 6, 3, 2  # marlhf_iter's defaults; K from the options above
        assert result["projected_hours_by_phase"]["online"] == pytest.approx(iterations * epochs * 60 * k * online["total"] / 3600)
        assert result["projected_hours"] == pytest.approx(sum(result["projected_hours_by_phase"].values()))


def test_train_step_variants_measure_the_same_actors_again_with_settings_changed(tmp_path, capsys):
    out = tmp_path / "train_step.json"
    code = train_step.main(
        ["--device", "cpu", "--json", str(out), "--variant", "gradient_checkpointing=false", "--variant",
         "gradient_checkpointing=true,checkpoint_layers=1,prefix_attention=chunked_flash", "model=tiny_random",
         "hardware=cpu", "hardware.gradient_checkpointing=true", "data=synthetic_short", "generation.max_value_tokens=2",
         "generation.max_new_tokens=300", *TRAIN_STEP_OPTIONS["magrpo"]]
    )
    assert code == 0
    settings = json.loads(out.read_text())["settings"]
    assert [s["setting"] for s in settings] == [
        "as configured", "gradient_checkpointing=false", "gradient_checkpointing=true,checkpoint_layers=1,prefix_attention=chunked_flash",
    ]
    assert all(s["s_per_env_step"]["update"] > 0 for s in settings)
    table = capsys.readouterr().out
    assert "| as configured |" in table and "| gradient_checkpointing=false |" in table


def test_train_step_variants_name_the_settings_they_accept():
    with pytest.raises(SystemExit, match="NAME one of offload_inactive_actor, gradient_checkpointing"):
        train_step.main(["--variant", "compile_decode=false", "model=tiny_random"])
    with pytest.raises(SystemExit, match="or checkpoint_layers=N"):
        train_step.main(["--variant", "checkpoint_layers=half"])
    with pytest.raises(SystemExit, match=re.escape("prefix_attention=auto|joint_softmax|flex|chunked_flash")):
        train_step.main(["--variant", "prefix_attention=fast"])
    with pytest.raises(SystemExit, match="does not apply to --algorithm madpo_iter"):
        train_step.main(["--algorithm", "madpo_iter", "--variant", "gradient_checkpointing=false"])


def test_the_prefix_attention_benchmark_times_each_kernel_against_float64(capsys):
    code = prefix_attention.main(
        ["--device", "cpu", "--dtype", "float32", "--prompts", "2", "--candidates", "3", "--prompt-tokens", "120",
         "--capacity", "32", "--generated", "9", "--layers", "2", "--repeat", "1", "--chunks", "3,4"]
    )
    assert code == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith(("| joint", "| flex", "| chunked"))]
    assert [row[0].strip() for row in rows] == [
        "joint_softmax", "flex", "chunked_flash (3 chunks per prompt)", "chunked_flash (4 chunks per prompt)",
        "chunked_triton (3 chunks per prompt)", "chunked_triton (4 chunks per prompt)",
    ]
    for row in rows:
        assert float(row[1]) > 0 and float(row[3]) < 1e-5  # ms per step, max abs error against float64


def test_the_prefix_attention_benchmark_times_the_split_kernel_for_one_prompt(capsys):
    code = prefix_attention.main(
        ["--device", "cpu", "--dtype", "float32", "--prompts", "1", "--candidates", "3", "--prompt-tokens", "120",
         "--capacity", "32", "--generated", "9", "--layers", "2", "--repeat", "1", "--kernels", "chunked_flash,split_flash"]
    )
    assert code == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith(("| chunked", "| split"))]
    assert [row[0].strip().split(" ")[0] for row in rows] == ["chunked_flash", "split_flash"]
    for row in rows:
        assert float(row[1]) > 0 and float(row[3]) < 1e-5


def test_the_matmul_floor_benchmark_times_each_projection_and_the_whole_step_per_row_count(capsys):
    shape = ["--layers", "2", "--hidden", "128", "--intermediate", "256", "--query-heads", "4", "--kv-heads", "2",
             "--head-dim", "32", "--vocab", "512"]
    code = matmul_floor.main(["--device", "cpu", "--dtype", "float32", "--rows", "1,3", "--repeat", "1", "--split-k", *shape])
    assert code == 0
    out = capsys.readouterr().out
    megabytes = {"q/k/v": 128 * 256 * 4e-6, "o": 128 * 128 * 4e-6, "gate/up": 128 * 512 * 4e-6, "down": 256 * 128 * 4e-6,
                 "output head": 512 * 128 * 4e-6}
    megabytes["step"] = 2 * (megabytes["q/k/v"] + megabytes["o"] + megabytes["gate/up"] + megabytes["down"]) + megabytes["output head"]
    assert f"a step reads {megabytes['step']:,.1f} MB of weights" in out
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith(("| F.linear", "| split-K"))]
    assert [(row[0].strip(), row[1].strip()) for row in rows] == [
        (method, name) for method in ("F.linear", "split-K")
        for name in ("q/k/v", "o", "gate/up", "down", "output head", "step")
    ] * 2
    for row in rows:
        assert float(row[2]) == pytest.approx(megabytes[row[1].strip()], abs=0.006)
        assert float(row[3].replace(",", "")) > 0 and float(row[5].replace(",", "")) > 0  # us per call, x floor


def test_the_decode_loop_benchmark_times_the_eager_and_the_compiled_loop(capsys):
    code = decode_loop.main(["--device", "cpu", "--rows", "2", "--agent", "0", "--days", "1", "--steps", "90", "--compile-loop"])
    assert code == 0  # the compiled loop decoded the eager loop's tokens
    table = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): line.split("|")[2:-1] for line in table.splitlines() if line.startswith("| ")}
    assert float(rows["eager"][0]) > 0 and float(rows["compiled"][0]) > 0
    assert rows["compiled"][2].strip() == "yes" and rows["eager / compiled"][0].strip().endswith("x")
    with pytest.raises(SystemExit, match="cannot hold agent 1's 5-day action"):
        decode_loop.main(["--device", "cpu", "--agent", "1", "--days", "5", "--steps", "20"])


def test_a_prefix_attention_variant_sets_both_decoders_and_asks_for_a_warm_up():
    actors = []
    for seed in (0, 1):
        tiny = build_tiny_random(seed=seed)
        actors.append(SimpleNamespace(model=tiny.model, decoder=StructuredDecoder(tiny.model, tiny.tokenizer)))
    layout = SimpleNamespace(actors=actors, parallel=False, offload_inactive=False)
    before = train_step.compiled_shape(layout)
    train_step.apply_variant(layout, train_step.parse_variant("prefix_attention=chunked_triton"))
    assert [actor.decoder.prefix_attention for actor in actors] == ["chunked_triton", "chunked_triton"]
    assert train_step.compiled_shape(layout) != before  # the decode step compiles again: the variant warms up


def test_the_profile_groups_kernels_by_what_their_names_say():
    kinds = {
        "fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention)": "attention",  # CUTLASS, but attention
        "_partials_kernel": "attention",
        "nvjet_sm90_tst_192x8_64x8_4x1_v_bz_TNT": "weight matmuls",
        "void cublasLt::splitKreduce_kernel<32, 16, int, float>": "weight matmuls",
        "_split_k_kernel": "weight matmuls",  # the decode layers' Triton matmul (travel/generation/kernels/skinny_matmul.py)
        "void at_cuda_detail::cub::detail::radix_sort::DeviceRadixSortOnesweepKernel": "vocabulary sort",
        "triton_poi_fused__unsafe_view_mul_silu_split_with_sizes_0": "other (fused elementwise, reductions)",
    }
    assert {name: measure.kernel_kind(name) for name in kinds} == kinds
