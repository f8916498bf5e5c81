"""Every option a training run would reject is rejected by `mode=dry` already, naming the option, before
any model factory is called (travel.run.Run.check_options and the typed algorithm configs)."""

import pytest

from tests.conftest import compose_config
from tests.test_train_smoke import MODEL_FACTORY_CALLS
from travel.run import Run

FORBIDDEN_FACTORY = "model._target_=tests.test_train_smoke.forbidden_model_factory"


@pytest.mark.parametrize(
    "overrides, option",
    [
        (["algorithm.advantage_mode=foo"], "algorithm.advantage_mode='foo'"),
        (["algorithm.logging_steps=0"], "algorithm.logging_steps=0"),
        (["algorithm=madpo", "algorithm.dpo_beta=-1"], "algorithm.dpo_beta=-1"),
        (["algorithm.learning_rate=nan"], "algorithm.learning_rate=nan"),
        (["algorithm.learning_rate=abc"], "algorithm.learning_rate='abc'"),
        (["algorithm=madpo", "algorithm.preference_num_candidates=1"], "algorithm.preference_num_candidates=1"),
        (["algorithm.num_generations=2.5"], "algorithm.num_generations=2.5"),
        (["generation.temperature=-1"], "generation.temperature=-1"),
        (["generation.top_p=0"], "generation.top_p=0"),
        (["generation.max_new_tokens=0"], "generation.max_new_tokens=0"),
        (["generation.temperature=abc"], "generation.temperature='abc'"),
        (["generation.max_value_tokens=2.5"], "generation.max_value_tokens=2.5"),
        (["generation.values=json"], "generation.values='json': choose one of free, catalog"),
        (["hardware.agent_devices=[cuda:7,cuda:7]"], "hardware.agent_devices[0]='cuda:7'"),
        (["hardware.agent_devices=[cuda:0]"], "hardware.agent_devices=['cuda:0']: give one device per agent"),
        (["hardware=2gpu", "algorithm=marlhf_iter"], "algorithm=marlhf_iter does not suit hardware=2gpu: use hardware=2gpu_preference"),
        (["hardware=2gpu_preference"], "algorithm=magrpo does not suit hardware=2gpu_preference: use hardware=2gpu"),
        (["hardware.gpu_memory_gib=-3"], "hardware.gpu_memory_gib=-3"),
        (["+hardware.gpus=2"], "hardware.gpus: not a hardware option"),
        (["+generation.top_k=5"], "generation.top_k: not a generation option"),
        (["generation.rows_per_call=0"], "generation.rows_per_call=0"),
        (["seed=abc"], "seed='abc'"),
        (["curriculum.eval_per_cell=0"], "curriculum.eval_per_cell=0"),
        (["curriculum.train_per_cell=1.7"], "curriculum.train_per_cell=1.7"),
        (["hardware.torch_threads=-1"], "hardware.torch_threads=-1"),
        (["hardware.compile_cache_dir=7"], "hardware.compile_cache_dir=7"),
        (["hardware.compile_cache_dir=' '"], "hardware.compile_cache_dir=' '"),
        (["hardware.parallel_training=both"], "hardware.parallel_training='both'"),
        (["hardware.compute_dtype=fp8"], "hardware.compute_dtype='fp8'"),
        (["hardware.decode_weights=bf16"], "hardware.decode_weights='bf16'"),
        (["hardware.decode_weights=copy"], "hardware.decode_weights=copy needs hardware.compute_dtype"),
        (["hardware.decode_matmul=cutlass"], "hardware.decode_matmul='cutlass'"),
        (["hardware.offload_inactive_actor=maybe"], "hardware.offload_inactive_actor='maybe'"),
        (["generation.greedy_eval=3"], "generation.greedy_eval=3"),
        (["generation.jump_forced=2"], "generation.jump_forced=2"),
        (["hardware.compile_decode=fast"], "hardware.compile_decode='fast'"),
        (["hardware.compile_prefill=yes"], "hardware.compile_prefill='yes'"),
        (["hardware.compile_update=1"], "hardware.compile_update=1"),
        (["hardware.num_gpus=1.5"], "hardware.num_gpus=1.5"),
        (["hardware.checkpoint_layers=-2"], "hardware.checkpoint_layers=-2"),
        (["hardware.checkpoint_layers=half"], "hardware.checkpoint_layers='half'"),
        (["hardware.checkpoint_layers=1", "hardware.gradient_checkpointing=false"], "hardware.checkpoint_layers=1 needs hardware.gradient_checkpointing=true"),
        (["logger.mode=offline"], "logger.mode=offline: W&B needs logger=wandb"),
        (["actor.layout=joint"], "actor.layout='joint'"),
        (["seed=-1"], "seed=-1: expected an integer in [0, 2**32)"),
        (["checkpoint.keep=0"], "checkpoint.keep=0"),
        (["checkpoint.every_env_steps=-5"], "checkpoint.every_env_steps=-5"),
        (["logger=wandb", "logger.mode=bogus"], "logger.mode='bogus': choose one of online, offline, disabled"),
        (["model.dtype=int3"], "model.dtype='int3': not a floating torch dtype"),
        (["resume=/nonexistent/dir"], "resume=/nonexistent/dir: not a complete checkpoint"),
        (["algorithm=madpo_iter", "algorithm.preference_replay_lambda=1.5"], "algorithm.preference_replay_lambda=1.5: must be a number in [0, 1]"),
        (["algorithm=madpo_iter", "algorithm.preference_replay_lambda=null"], "preference_replay_mode=lambda_decay needs it"),
        (["actor=centralized", "hardware=2gpu"], "actor=centralized trains one policy, but hardware=2gpu trains one actor per GPU"),
        (["actor=centralized", "algorithm=madpo_iter", "generation_mode=centralized", "generation_mode.teacher_agent_index=1"],
         "generation_mode.teacher_agent_index=1: with actor=centralized the joint actor is the only policy"),
    ],
)
def test_the_dry_run_rejects_what_training_would_reject(tmp_path, overrides, option):
    MODEL_FACTORY_CALLS.clear()
    cfg = compose_config("mode=dry", "data=synthetic", *overrides, FORBIDDEN_FACTORY)
    with pytest.raises(ValueError) as raised:
        Run(cfg, run_dir=str(tmp_path))()
    assert option in str(raised.value)
    assert MODEL_FACTORY_CALLS == []
    assert not (tmp_path / "dry_run.json").exists()
