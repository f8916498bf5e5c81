"""Run: builds the parts a config describes, lazily through `_target_` paths, and executes its mode.

Nothing here loads model weights until a mode needs them, so `mode=dry` checks data, catalogs, the split
and the budgets on any machine.
"""

from __future__ import annotations

import json
import shlex
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Optional

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from travel.agents.devices import agent_devices
from travel.agents.hardware import HardwareConfig
from travel.agents.layouts import layout_class
from travel.algorithms.core.config import AlgorithmConfig
from travel.algorithms.core.evaluation import Evaluator
from travel.algorithms.core.registry import AlgorithmSpec, TrainingParts, algorithm_config, spec_for
from travel.algorithms.core.rollout import JointRolloutSampler
from travel.algorithms.preference.comparators import ComparatorSpec
from travel.checkpoint.evaluate_saved import evaluate_saved
from travel.checkpoint.run_dir import claim, recorded
from travel.checkpoint.signals import RequeueWindow, RunInterrupted, hand_over, requeued_by_slurm, stop_on_signals
from travel.checkpoint.store import CheckpointStore, resolve_resume
from travel.data.module import DataModule
from travel.generation.compiled_forward import use_compile_cache
from travel.generation.config import GenerationConfig
from travel.io import write_text_atomic
from travel.logging.dry_report import build_dry_report, excluded_line, format_dry_report
from travel.logging.memory_plan import check_memory_plan
from travel.logging.report import CURVE_FILE, format_held_out_table, format_table, plot_eval_curve, write_summary
from travel.logging.run_name import run_identity, slurm_job_label
from travel.run_options import check_run_options


def hydra_run_dir() -> Optional[Path]:
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.output_dir)
    return None


def job_command() -> Optional[str]:
    """A sweep job's own command, `python launch.py` with the job's overrides (a multirun's command line, or a
    launcher's worker's, names no single run); None outside a sweep, where the process's command line is the run's."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return None
    return shlex.join(["python", "launch.py", *HydraConfig.get().overrides.task])


def build(node: Any) -> Any:
    """`instantiate(node)`, with an option error of the built class (a ValueError naming the option) raised
    as itself rather than inside Hydra's InstantiationException."""
    from hydra.errors import InstantiationException

    try:
        return instantiate(node)
    except InstantiationException as exc:
        if isinstance(exc.__cause__, ValueError):
            raise exc.__cause__ from None
        raise


class Run:
    MODES = ("dry", "train", "eval")

    def __init__(self, cfg: DictConfig, run_dir: Optional[str] = None, score: Optional[Callable[..., Any]] = None):
        """`score`: the reward seam's score function (travel.algorithms.core.rollout.ScoreFn); None is the task
        reward. Training rollouts, evaluation and preference labels all use it."""
        self.cfg = cfg
        self.score = score
        mode = cfg.mode.name
        if mode not in self.MODES:
            raise ValueError(f"mode={mode!r} is not one of {', '.join(self.MODES)}")
        self.run_dir = Path(run_dir) if run_dir else (hydra_run_dir() or Path("outputs") / "unnamed")
        self.memory_plan: Optional[dict[str, Any]] = None  # check_options' GPU memory plan (dry_run.json)

    @cached_property
    def data(self) -> DataModule:
        return DataModule(build(self.cfg.data), build(self.cfg.curriculum))

    @cached_property
    def reward_config(self):
        return build(self.cfg.reward)

    @cached_property
    def hardware(self) -> HardwareConfig:
        """The typed `hardware=` preset (travel/agents/hardware.py), validated."""
        return HardwareConfig.from_mapping(self.cfg.hardware)

    @cached_property
    def generation(self) -> GenerationConfig:
        """The typed `generation=` options (travel/generation/config.py), validated."""
        return GenerationConfig.from_mapping(self.cfg.generation)

    @cached_property
    def algorithm(self) -> AlgorithmConfig:
        """The typed config of `algorithm=` (travel/algorithms/core/config.py), validated."""
        return algorithm_config(self.cfg.algorithm)

    @cached_property
    def algorithm_spec(self) -> AlgorithmSpec:
        return spec_for(self.algorithm)

    @property
    def short_epochs(self) -> int:
        return int(self.cfg.curriculum.short_epochs)

    @cached_property
    def budget(self):
        """The algorithm's budget over this run's split: what mode=dry reports and the trainer checks."""
        return self.algorithm_spec.budget(self.algorithm, self.data.split, self.short_epochs)

    def save_config(self) -> None:
        write_text_atomic(self.run_dir / "config.yaml", OmegaConf.to_yaml(self.cfg, resolve=True))

    @property
    def resume(self) -> Optional[str]:
        """resume=auto (the newest complete checkpoint of this run directory), resume=<checkpoint dir>, or None;
        a job Slurm requeued (travel/checkpoint/signals.py) resumes as with resume=auto."""

        value = OmegaConf.select(self.cfg, "resume", default=None)
        if value is None and requeued_by_slurm():
            return "auto"
        return None if value is None else str(value)

    def __call__(self) -> dict[str, Any]:
        """The mode's work, in a run directory that holds no other run (unless resuming), with its status
        file and launch.log (travel/checkpoint/run_dir.py)."""

        claim(self.run_dir, resuming=self.resume is not None)
        try:
            with recorded(self.run_dir, job_command()):
                self.save_config()
                return getattr(self, f"_{self.cfg.mode.name}")()
        except RunInterrupted as interrupted:
            hand_over(interrupted)  # SIGUSR2 under Slurm: requeue now that the checkpoint is written
            raise

    def _eval(self) -> dict[str, Any]:
        return evaluate_saved(self)

    def _dry(self) -> dict[str, Any]:
        report = build_dry_report(self)
        path = write_text_atomic(self.run_dir / "dry_run.json", json.dumps(report, indent=2) + "\n")
        print(format_dry_report(report))
        print(f"wrote {path}")
        return report

    def _train(self) -> dict[str, Any]:
        split = self._training_plan()  # every config check happens here, before any weights load
        checkpoints, resume = self._checkpointing()
        self._prepare_torch()
        # The signal handlers cover the cleanup too: a requeue's hand-over must come after the tracker closed.
        with stop_on_signals(RequeueWindow.for_this_job()) as stop:
            return self._train_with(split, checkpoints, resume, stop)

    def _train_with(self, split: Any, checkpoints: Any, resume: Any, stop: Any) -> dict[str, Any]:
        """The training run proper: tracker, actors, trainer, outputs; the parts closed whatever happens."""
        tracker = instantiate(self.cfg.logger)(
            run_dir=self.run_dir,
            config=OmegaConf.to_container(self.cfg, resolve=True),
            **self.wandb_identity(),
            **(
                {"resume_bytes": resume.trainer["metrics_bytes"], "run_id": resume.trainer["wandb_run_id"]}
                if resume is not None
                else {}
            ),
        )
        model_factory = instantiate(self.cfg.model, _partial_=True)
        actors = sampler = None
        try:
            actors = instantiate(self.cfg.actor)(
                model_factory,
                self.hardware,
                self.generation,
                learning_rate=self.algorithm.learning_rate,
                seed=int(self.cfg.seed),
            )
            if resume is not None:
                resume.restore(actors)
                print(f"resuming from {resume.path} (env step {resume.env_step})")
            sampler, evaluator = self.evaluation_parts(actors, tracker)
            parts = TrainingParts(
                actors=actors,
                sampler=sampler,
                evaluator=evaluator,
                tracker=tracker,
                run_dir=self.run_dir,
                split=split,
                short_epochs=self.short_epochs,
                reward_config=self.reward_config,
                seed=int(self.cfg.seed),
                score=self.score,
                comparator_spec=self.comparator_spec,
                model_factory=model_factory,
                gradient_checkpointing=self.hardware.gradient_checkpointing,
                checkpoints=checkpoints,
                resume=resume,
                stop=stop,
            )
            result = self.algorithm_spec.build_trainer(self.algorithm, parts).train()
            return self._write_training_outputs(result, actors)
        finally:
            for part in (sampler, actors):
                if part is not None:
                    part.close()
            tracker.close()

    def _checkpointing(self) -> tuple[Any, Any]:
        """The checkpoint store of an algorithm that writes checkpoints (None otherwise), and the checkpoint that
        resume= names (None without one, or for resume=auto before the run has written any)."""

        if not self.algorithm_spec.checkpoints:  # resume= was refused already (travel/run_options.py)
            return None, None
        options = self.cfg.checkpoint  # checked with the other options
        meta = {"algorithm": self.algorithm.name, "layout": str(self.cfg.actor.layout)}
        resume = resolve_resume(self.resume, self.run_dir)
        if resume is not None:
            resume.check_matches(meta)
        store = CheckpointStore(
            self.run_dir,
            keep=options.get("keep", 2),
            every_env_steps=options.get("every_env_steps"),
            meta=meta,
            last_env_step=resume.env_step if resume is not None else None,
        )
        return store, resume

    def wandb_identity(self) -> dict[str, Any]:
        """The W&B name, group and tags of this run (travel/logging/run_name.py); logger.name/group win when set."""

        logger = self.cfg.logger
        identity = run_identity(
            algorithm=self.algorithm,
            comparator=self.comparator_spec,
            joint_actor=layout_class(str(self.cfg.actor.layout)).joint,
            model_name=str(self.cfg.model.name),
            train_rows=len(self.data.split.train),
            seed=int(self.cfg.seed),
            job=slurm_job_label(),
            base_tags=list(logger.get("tags") or ()),
        )
        return {"name": logger.get("name") or identity.name, "group": logger.get("group") or identity.group, "tags": identity.tags}

    def evaluation_parts(self, layout: Any, tracker: Any) -> tuple[Any, Any]:
        """The rollout sampler over `layout` (the run's score function) and the evaluator of the split's eval rows."""

        generation, split = self.generation, self.data.split
        sampler = JointRolloutSampler(
            layout, self.reward_config, score=self.score, parallel=layout.parallel, rows_per_call=generation.rows_per_call
        )
        evaluator = Evaluator(
            sampler,
            anchor_rows=split.anchor,
            eval_rows=split.eval,
            panel_size=split.panel_size,
            tracker=tracker,
            greedy=generation.greedy_eval,
            rows_per_call=generation.eval_rows_per_call,
            held_out=split.held_out,
        )
        return sampler, evaluator

    @cached_property
    def comparator_spec(self):
        return ComparatorSpec.from_config(self.cfg, self.algorithm)

    def check_options(self, on_this_machine: bool = False) -> None:
        """What both modes check before any weights load (travel/run_options.py), then the GPU memory plan against
        `hardware.gpu_memory_gib` and, `on_this_machine` (training), the cards this machine has
        (travel/logging/memory_plan.py)."""

        check_run_options(self)
        self.memory_plan = check_memory_plan(self, detect=on_this_machine)

    def _training_plan(self):
        """The split after checking every option a training run needs, without loading weights: the options
        mode=dry checks, then the curriculum and eval pool, the catalogs and the devices on this machine."""

        self.check_options(on_this_machine=True)
        split = self.data.split
        self.data.check_catalogs()

        print(excluded_line({str(index): reason for index, reason in sorted(split.excluded.items())}).strip())
        agent_devices(list(self.hardware.agent_devices), self.hardware.parallel_training)
        return split

    def _prepare_torch(self) -> None:
        """Seeds python, numpy and torch from cfg.seed; applies hardware.torch_threads and
        hardware.compile_cache_dir when set."""
        import random

        import numpy
        import torch

        seed = int(self.cfg.seed)
        random.seed(seed)
        numpy.random.seed(seed)
        torch.manual_seed(seed)  # seeds every CUDA device too
        if self.hardware.torch_threads:
            torch.set_num_threads(self.hardware.torch_threads)
        use_compile_cache(self.hardware.compile_cache_dir)

    def _write_training_outputs(self, result, actors) -> dict[str, Any]:
        """Final actors (output.save_final_model, default true), the initial/final/delta table and the eval plot."""

        if bool(OmegaConf.select(self.cfg, "output.save_final_model", default=True)):
            actors.save(self.run_dir / "actors")
        points = result.evaluations
        initial, final = points[0], points[-1]
        tables = [format_table(initial.public, final.public, initial_step=initial.env_step, final_step=final.env_step)]
        if final.held_out:
            tables.append(format_held_out_table(final.held_out, final.env_step))
        print("\n\n".join(tables))
        write_summary(self.run_dir, f"{self.cfg.algorithm.name} seed {self.cfg.seed}", *tables)
        plot_eval_curve(
            [(point.env_step, point.public) for point in points],
            self.run_dir / CURVE_FILE,
            title=f"{self.cfg.algorithm.name} seed {self.cfg.seed}: fixed-anchor evaluation (greedy)",
            train_records=[json.loads(line) for line in (self.run_dir / "metrics.jsonl").read_text().splitlines()],
        )
        print(f"wrote {self.run_dir}")
        return {
            "env_steps": result.env_steps,
            "optimizer_updates_per_agent": result.optimizer_updates,
            "eval_env_steps": result.eval_env_steps,
            "initial": initial.public,
            "final": final.public,
            **({"preference_counts": result.counts.as_dict()} if result.counts is not None else {}),
        }
