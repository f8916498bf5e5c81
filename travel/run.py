"""Run: builds the parts a config describes, lazily through `_target_` paths, and executes its mode.

Nothing here loads model weights until a mode needs them, so `mode=dry` checks data, catalogs, the split
and the budgets on any machine.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Optional

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from travel.algorithms.schedule import TrainingSchedule, curriculum_schedule
from travel.data.module import DataModule


def hydra_run_dir() -> Optional[Path]:
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.output_dir)
    return None


class Run:
    MODES = ("dry", "train")

    def __init__(self, cfg: DictConfig, run_dir: Optional[str] = None, score: Optional[Callable[..., Any]] = None):
        """`score`: the reward seam's score function (travel.algorithms.rollout.ScoreFn); None is the task
        reward. Training rollouts, evaluation and preference labels all use it."""
        self.cfg = cfg
        self.score = score
        mode = cfg.mode.name
        if mode not in self.MODES:
            raise ValueError(f"mode={mode!r} is not one of {', '.join(self.MODES)}")
        self.run_dir = Path(run_dir) if run_dir else (hydra_run_dir() or Path("outputs") / "unnamed")

    @cached_property
    def data(self) -> DataModule:
        return DataModule(instantiate(self.cfg.data), instantiate(self.cfg.curriculum))

    @cached_property
    def reward_config(self):
        return instantiate(self.cfg.reward)

    @cached_property
    def schedule(self) -> TrainingSchedule:
        algorithm = self.cfg.algorithm
        return curriculum_schedule(
            self.data.split,
            num_train_epochs=int(algorithm.num_train_epochs),
            num_generations=int(algorithm.num_generations),
            rollout_buffer_size=int(algorithm.rollout_buffer_size),
            short_epochs=int(self.cfg.curriculum.short_epochs),
            use_short_phase=bool(algorithm.use_short_phase),
            eval_every_epochs=int(algorithm.eval_every_epochs),
        )

    def save_config(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.yaml").write_text(OmegaConf.to_yaml(self.cfg, resolve=True))

    def __call__(self) -> dict[str, Any]:
        self.save_config()
        return getattr(self, f"_{self.cfg.mode.name}")()

    def _dry(self) -> dict[str, Any]:
        from travel.logging.dry_report import build_dry_report, format_dry_report

        report = build_dry_report(self)
        path = self.run_dir / "dry_run.json"
        path.write_text(json.dumps(report, indent=2) + "\n")
        print(format_dry_report(report))
        print(f"wrote {path}")
        return report

    def _train(self) -> dict[str, Any]:
        from travel.agents.actors import build_actors
        from travel.algorithms.evaluation import Evaluator
        from travel.algorithms.rollout import JointRolloutSampler

        schedule, split = self._training_plan()  # every config check happens here, before any weights load
        self._seed_everything()
        tracker = instantiate(self.cfg.logger)(
            run_dir=self.run_dir, config=OmegaConf.to_container(self.cfg, resolve=True)
        )
        model_factory = instantiate(self.cfg.model, _partial_=True)
        actors = sampler = None
        try:
            actors = build_actors(
                model_factory,
                self.cfg.hardware,
                self.cfg.generation,
                learning_rate=float(self.cfg.algorithm.learning_rate),
                seed=int(self.cfg.seed),
            )
            sampler = JointRolloutSampler(
                actors.actors,
                self.reward_config,
                score=self.score,
                parallel=actors.parallel,
                rows_per_call=OmegaConf.select(self.cfg, "generation.rows_per_call", default=None),
            )
            evaluator = Evaluator(
                sampler,
                anchor_rows=split.anchor,
                eval_rows=split.eval,
                panel_size=split.panel_size,
                tracker=tracker,
                greedy=bool(self.cfg.generation.greedy_eval),
                rows_per_call=int(OmegaConf.select(self.cfg, "generation.eval_rows_per_call", default=1)),
            )
            trainer = instantiate(self.cfg.algorithm.trainer)(
                schedule=schedule, sampler=sampler, actors=actors, evaluator=evaluator, tracker=tracker,
                run_dir=self.run_dir, **self._preference_parts(split, model_factory),
            )
            result = trainer.train()
            return self._write_training_outputs(result, actors)
        finally:
            for part in (sampler, actors):
                if part is not None:
                    part.close()
            tracker.close()

    def _is_preference_algorithm(self) -> bool:
        from travel.algorithms.budgets import ALGORITHM_FAMILIES

        return ALGORITHM_FAMILIES.get(str(self.cfg.algorithm.name)) in ("madpo", "marlhf")

    @cached_property
    def comparator_spec(self):
        from travel.algorithms.comparators import ComparatorSpec

        return ComparatorSpec.from_config(self.cfg)

    def _preference_parts(self, split, model_factory) -> dict[str, Any]:
        """What the preference trainers need beyond MAGRPO's parts (travel/algorithms/madpo.py, marlhf.py)."""
        if not self._is_preference_algorithm():
            return {}
        return {
            "algorithm": self.cfg.algorithm,
            "reward_config": self.reward_config,
            "score": self.score,
            "train_rows": split.train,
            "seed": int(self.cfg.seed),
            "comparator_spec": self.comparator_spec,
            "model_factory": model_factory,
            "gradient_checkpointing": bool(OmegaConf.select(self.cfg, "hardware.gradient_checkpointing", default=False)),
        }

    def _training_plan(self):
        """The schedule and split after checking every option a training run needs, without loading weights:
        the trainer node, the curriculum and eval pool, catalogs, K, devices and generation settings."""
        from travel.agents.devices import agent_devices
        from travel.algorithms.evaluation import eval_rows_per_call_option
        from travel.algorithms.rollout import rows_per_call_option

        if OmegaConf.select(self.cfg, "algorithm.trainer") is None:
            raise ValueError(f"algorithm={self.cfg.algorithm.name} has no `trainer` node: mode=train cannot build it")
        split = self.data.split
        if self._is_preference_algorithm():  # they price their own budget; option errors surface here
            from travel.algorithms.budgets import preference_budget

            preference_budget(self.cfg.algorithm, split)
            self.comparator_spec  # noqa: B018  (option errors surface before any weights load)
            schedule = None
        else:
            schedule = self.schedule
        self.data.check_catalogs()
        if not split.anchor:
            raise ValueError("curriculum.eval_per_cell=0: training evaluates the anchor panel, so the eval pool must not be empty")
        agent_devices(list(self.cfg.hardware.agent_devices), str(self.cfg.hardware.parallel_training))
        generation = self.cfg.generation
        for key in ("max_new_tokens", "max_value_tokens"):
            if int(generation[key]) < 1:
                raise ValueError(f"generation.{key}={generation[key]}: must be >= 1")
        rows_per_call_option(OmegaConf.select(generation, "rows_per_call", default=None))
        eval_rows_per_call_option(OmegaConf.select(generation, "eval_rows_per_call", default=1))
        from travel.generation.decoder import VALUE_MODES

        values = OmegaConf.select(generation, "values", default="free")
        if values not in VALUE_MODES:
            raise ValueError(f"generation.values={values!r}: choose one of {', '.join(VALUE_MODES)}")
        if not float(generation.temperature) > 0:
            raise ValueError(f"generation.temperature={generation.temperature}: must be > 0")
        if not 0 < float(generation.top_p) <= 1:
            raise ValueError(f"generation.top_p={generation.top_p}: must be in (0, 1]")
        return schedule, split

    def _seed_everything(self) -> None:
        """Seeds python, numpy and torch from cfg.seed; applies hardware.torch_threads when set."""
        import random

        import numpy
        import torch

        seed = int(self.cfg.seed)
        random.seed(seed)
        numpy.random.seed(seed)
        torch.manual_seed(seed)  # seeds every CUDA device too
        threads = OmegaConf.select(self.cfg, "hardware.torch_threads", default=None)
        if threads:
            torch.set_num_threads(int(threads))

    def _write_training_outputs(self, result, actors) -> dict[str, Any]:
        """Final actors (output.save_final_model, default true), the initial/final/delta table and the eval plot."""
        from travel.logging.report import CURVE_FILE, format_table, plot_eval_curve

        if bool(OmegaConf.select(self.cfg, "output.save_final_model", default=True)):
            actors.save(self.run_dir / "actors")
        points = result.evaluations
        initial, final = points[0], points[-1]
        print(format_table(initial.public, final.public, initial_step=initial.env_step, final_step=final.env_step))
        plot_eval_curve(
            [(point.env_step, point.public) for point in points],
            self.run_dir / CURVE_FILE,
            title=f"{self.cfg.algorithm.name} seed {self.cfg.seed}: fixed-anchor evaluation (greedy)",
        )
        print(f"wrote {self.run_dir}")
        return {
            "env_steps": result.env_steps,
            "optimizer_updates_per_agent": result.optimizer_updates,
            "eval_env_steps": result.eval_env_steps,
            "initial": initial.public,
            "final": final.public,
            **({"preference_counts": result.counts.as_dict()} if hasattr(result, "counts") else {}),
        }
