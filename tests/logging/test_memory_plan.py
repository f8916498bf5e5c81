"""The GPU memory plan (travel/logging/memory_plan.py): what `mode=dry` predicts each phase holds on each device,
the refusal of a plan that cannot fit the card, naming what would make it fit, and its arithmetic."""

from __future__ import annotations

import json

import pytest

from tests.conftest import compose_config
from tests.test_train_smoke import MODEL_FACTORY_CALLS
from travel.agents.architectures import ARCHITECTURES
from travel.logging.memory_plan import GIB, MemoryPlan, MemoryPlanError, forward_activation_bytes
from travel.run import Run

RANDOM_4B = ("data=synthetic", "model=random_qwen3_4b")


def plan(*overrides: str) -> MemoryPlan:
    return MemoryPlan(Run(compose_config(*RANDOM_4B, *overrides)))


def test_the_dry_run_writes_the_plan_of_each_phase_on_each_device(tmp_path):
    Run(compose_config(*RANDOM_4B, "hardware=1x80gb", "algorithm=madpo_iter", "mode=dry"), run_dir=str(tmp_path))()
    memory = json.loads((tmp_path / "dry_run.json").read_text())["memory_plan"]
    assert memory["card_gib"] == 79 and memory["parameters"] == ARCHITECTURES["random_qwen3_4b"].parameters
    assert set(memory["phases_gib"]) == {"cuda:0"}
    assert set(memory["phases_gib"]["cuda:0"]) == {"comparator collection", "update", "evaluation"}
    weights = memory["parameters"] * 2 / GIB  # bfloat16
    update = memory["components_gib"]["cuda:0 update"]
    assert update["policy 0 weights"] == pytest.approx(weights, abs=0.01)
    assert update["policy 1 optimizer state"] == pytest.approx(2 * weights, abs=0.01)
    assert update["gradients"] == pytest.approx(weights, abs=0.01)
    assert memory["peak_gib"]["cuda:0"] == max(memory["phases_gib"]["cuda:0"].values()) < 79


def test_a_plan_that_cannot_fit_the_card_is_refused_before_any_model_loads_naming_what_fits(tmp_path):
    """Both 4B actors resident with 12 checkpointed layers need about 105 GiB: an 80 GB card refuses it, naming
    the option (and the preset) under which it fits."""
    MODEL_FACTORY_CALLS.clear()
    cfg = compose_config(
        *RANDOM_4B, "hardware=1xb200", "hardware.gpu_memory_gib=79", "mode=dry",
        "model._target_=tests.test_train_smoke.forbidden_model_factory",
    )
    with pytest.raises(MemoryPlanError) as raised:
        Run(cfg, run_dir=str(tmp_path))()
    message = str(raised.value)
    assert message.startswith("hardware=1xb200: the memory plan needs cuda:0 ") and "on a 79 GiB card" in message
    assert "it fits with hardware.checkpoint_layers=null" in message and "hardware=1x80gb" in message
    assert MODEL_FACTORY_CALLS == [] and not (tmp_path / "dry_run.json").exists()
    Run(compose_config(*RANDOM_4B, "hardware=1xb200", "mode=dry"), run_dir=str(tmp_path / "fits"))()  # 139 GiB


def test_the_cpu_and_unknown_models_plan_nothing():
    assert plan("hardware=cpu").devices == {}
    run = Run(compose_config(*RANDOM_4B, "hardware=1x80gb", "model.name=another_model"))
    assert MemoryPlan(run).to_report(79) == {"model": "another_model", "note": "no architecture known for this model: no plan"}


def test_the_plan_follows_the_options_that_trade_memory():
    """Checkpointing fewer layers keeps more activations; parking the idle actor frees its weights and optimizer
    state during the other's update; a decode copy adds weights to every phase; a prompt cache kept per candidate
    adds the prompt's keys and values K - 1 times."""
    update = {layers: plan("hardware=1xb200", f"hardware.checkpoint_layers={layers}").devices["cuda:0"]["update"] for layers in (0, 12, 36)}
    assert update[0] > update[12] > update[36]
    arch = ARCHITECTURES["random_qwen3_4b"]
    kept_layer = forward_activation_bytes(arch, 2, 1000, 0, 0) - forward_activation_bytes(arch, 2, 1000, 0, 2)
    assert kept_layer > 0
    resident = plan("hardware=1x80gb")
    parked = plan("hardware=1x80gb", "hardware.offload_inactive_actor=true")
    freed = resident.devices["cuda:0"]["update"] - parked.devices["cuda:0"]["update"]
    assert freed == pytest.approx(3 * arch.parameters * 2)
    copied = plan("hardware=1x80gb", "hardware.decode_weights=fused")
    for phase in ("generation", "evaluation"):
        assert copied.devices["cuda:0"][phase] - resident.devices["cuda:0"][phase] == pytest.approx(2 * arch.parameters * 2)
    repeated = plan("hardware=1x80gb", "hardware.share_prompt_cache=never").devices["cuda:0"]["generation"]
    assert plan("hardware=1x80gb", "hardware.step_backend=eager").devices["cuda:0"]["generation"] == repeated
    assert repeated > resident.devices["cuda:0"]["generation"]


# Peaks measured by bench/train_step.py (torch.cuda.max_memory_allocated) on real train rows with random_qwen3_4b,
# rows of docs/performance.md and docs/hardware.md: (algorithm, overrides, rows the benchmark ran, GiB).
MEASURED = [
    ("magrpo", ["hardware=1x80gb"], 10, 63.0),  # every layer checkpointed, both actors resident (H200 and H100)
    ("magrpo", ["hardware=1xb200"], 10, 100.5),  # 12 layers checkpointed (H200)
    ("magrpo", ["hardware=1xb200", "hardware.checkpoint_layers=0"], 10, 120.8),  # none (H200)
    ("magrpo", ["hardware=1xb200", "hardware.offload_inactive_actor=true", "hardware.gradient_checkpointing=false",
                "hardware.checkpoint_layers=null", "hardware.compile_update=false"], 10, 123.4),  # parked, eager (H200)
    ("madpo_iter", ["hardware=1x80gb"], 2, 60.6),  # a warm-up and a measured row (H100)
]


@pytest.mark.parametrize("algorithm, overrides, rows, measured", MEASURED)
def test_the_plan_is_within_15_percent_of_the_measured_peaks(algorithm, overrides, rows, measured, shared_data_dir):
    cfg = compose_config(
        "model=random_qwen3_4b", "data=local", f"data.path={shared_data_dir / 'train.jsonl'}", "curriculum.train_per_cell=4",
        "curriculum.eval_per_cell=1", f"algorithm={algorithm}", *overrides,
    )
    run = Run(cfg)
    predicted = max(MemoryPlan(run, train_rows=list(run.data.split.train)[:rows]).peaks().values()) / GIB
    assert predicted == pytest.approx(measured, rel=0.15)


def test_the_plan_of_the_smollm2_learning_experiment_is_within_15_percent_of_its_measured_peak(shared_data_dir, tmp_path):
    """experiment=smollm2_gpu_learning on an H100: memory/peak_gpu_gib of its metrics.jsonl, 18.7 GiB over the whole
    run at seeds 42 and 1 (docs/hardware.md; the runs are under docs/results/runs/)."""
    cfg = compose_config(
        "experiment=smollm2_gpu_learning", f"data.path={shared_data_dir / 'train.jsonl'}", f"model.path={tmp_path}"
    )
    predicted = max(MemoryPlan(Run(cfg)).peaks().values()) / GIB
    assert predicted == pytest.approx(18.7, rel=0.15)
