"""What the benchmarks that run the project's own actors share: its config composed as `launch.py` composes
it (with benchmark defaults: random_qwen3_4b on one GPU, the real train rows when they are here), the
command line's device and Hydra overrides, and the actors built from that config."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from travel.agents.layouts import PolicyLayout
from travel.algorithms.core.registry import load_algorithms

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO_ROOT / ".." / "shared" / "data" / "travelplanner" / "train.jsonl"
DEFAULT_OVERRIDES = ["model=random_qwen3_4b", "hardware=1xb200"]
REAL_DATA_OVERRIDES = [
    "data=local",
    f"data.path={DEFAULT_DATA}",
    "curriculum.train_per_cell=4",
    "curriculum.eval_per_cell=1",
]


def add_project_arguments(parser: Any) -> None:
    parser.add_argument("--device", default=None, help="put both actors here (default: hardware.agent_devices)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for launch.py")


def compose_config(overrides: Sequence[str], device: str | None = None) -> Any:
    """The project's config with the defaults above (the real train rows unless `data=` is given), then
    `overrides` (later wins) and, with `device`, both actors on it."""
    defaults = list(DEFAULT_OVERRIDES)
    if not any(override.startswith("data=") for override in overrides):
        defaults += REAL_DATA_OVERRIDES
    extra = [f"hardware.agent_devices=[{device},{device}]"] if device else []
    load_algorithms()
    with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=[*defaults, *overrides, *extra])


def project_actors(cfg: Any) -> PolicyLayout:
    """The actors of the config's layout (actor=), exactly as a run of `cfg` builds them."""
    return instantiate(cfg.actor)(
        instantiate(cfg.model, _partial_=True),
        cfg.hardware,
        cfg.generation,
        learning_rate=float(cfg.algorithm.learning_rate),
        seed=int(cfg.seed),
    )
