"""Run: builds the parts a config describes, lazily through `_target_` paths, and executes its mode.

Nothing here loads model weights until a mode needs them, so `mode=dry` checks data, catalogs, the split
and the budgets on any machine.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any, Optional

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

    def __init__(self, cfg: DictConfig, run_dir: Optional[str] = None):
        self.cfg = cfg
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
        raise NotImplementedError(
            f"mode=train: no trainer is available for algorithm={self.cfg.algorithm.name} in this version; "
            "use mode=dry to check the data, split and budgets"
        )
