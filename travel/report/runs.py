"""The run directories a report reads, and what it takes from each.

A run directory is one that holds `config.yaml` (what every mode writes first). Its group comes from that
resolved config, never from the directory's name: the algorithm, the comparator (iterative algorithms only;
the others have none) with the central teacher marked, and the actor layout. A run counts as complete when its
`status` says `completed` and its `eval_final.json` exists; any other run is listed apart with its status and
error and never enters a mean.

The fixed-anchor curve is the run's eval/* records in `metrics.jsonl` (the first at env step 0 before any
update, the last the terminal evaluation's first panel), so initial and final are its first and last points; its
train/* records are kept as series for the diagnostics table (travel/report/diagnostics.py).
`run.json` (travel/checkpoint/run_dir.py) gives its command, card and device minutes, summed over its segments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

import yaml

from travel.algorithms.core.registry import registered

SKIPPED_DIRS = {"checkpoints", "actors", "wandb", "preference_replay", "policy_checkpoints", "reward_distributions", ".submitit", ".hydra"}


class ReportError(ValueError):
    """A path or run directory the report cannot read; the message names it."""


@dataclass(frozen=True)
class Group:
    algorithm: str
    comparator: str  # "-" for algorithms without a comparator
    layout: str
    values: str = "catalog"  # generation.values: catalog or free text

    def label(self) -> str:
        parts = [self.algorithm] + ([self.comparator] if self.comparator != "-" else []) + ([self.layout] if self.layout != "decentralized" else [])
        return " / ".join(parts + ([f"{self.values} values"] if self.values != "catalog" else []))


@dataclass
class RunSummary:
    path: Path
    group: Group
    seed: int
    status: str  # completed | stopped | failed | running | no status
    error: str = ""
    curve: list[tuple[int, dict[str, float]]] = field(default_factory=list)  # (env_step, eval/* without the prefix)
    held_out: dict[str, Any] = field(default_factory=dict)  # eval_final.json's held-out groups (held_out_eval)
    segments: list[dict[str, Any]] = field(default_factory=list)  # run.json: one per start of the run
    series: dict[str, list[float]] = field(default_factory=dict)  # train/* records without the prefix, in log order

    @property
    def device_minutes(self) -> Optional[float]:
        """Wall minutes over the run's segments; None where run.json is missing."""
        return sum(float(s["wall_s"]) for s in self.segments) / 60 if self.segments else None

    @property
    def runs_together(self) -> int:
        """The most runs that shared the card in any segment (1 unless the archive recorded more)."""
        return max((int(s.get("runs_together", 1)) for s in self.segments), default=1)

    @property
    def devices(self) -> str:
        names = dict.fromkeys(name for s in self.segments for name in s.get("devices", []))
        return ", ".join(names) if names else ("cpu" if self.segments else "n/a")

    @property
    def command(self) -> str:
        return self.segments[0]["command"] if self.segments else ""

    @property
    def complete(self) -> bool:
        return self.status == "completed" and (self.path / "eval_final.json").is_file() and len(self.curve) >= 1

    @property
    def initial(self) -> dict[str, float]:
        return self.curve[0][1]

    @property
    def final(self) -> dict[str, float]:
        return self.curve[-1][1]


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Every run directory at or under `paths` (a run, a sweep, or a folder of either), sorted, each once."""
    found: set[Path] = set()
    for given in paths:
        root = Path(given)
        if not root.is_dir():
            raise ReportError(f"{root}: not a directory (give run or sweep directories)")
        stack = [root]
        while stack:
            directory = stack.pop()
            if (directory / "config.yaml").is_file():
                found.add(directory.resolve())
                continue
            stack.extend(p for p in directory.iterdir() if p.is_dir() and p.name not in SKIPPED_DIRS)
    return sorted(found)


def _iterative_algorithms() -> set[str]:
    return set(registered(iterative=True))


def group_of(config: dict[str, Any], where: Path, iterative: Optional[set[str]] = None) -> Group:
    try:
        algorithm = str(config["algorithm"]["name"])
        layout = str(config["actor"]["layout"])
    except (KeyError, TypeError) as exc:
        raise ReportError(f"{where}/config.yaml: no {exc} (not a config this project wrote)") from None
    comparator = "-"
    if algorithm in (iterative if iterative is not None else _iterative_algorithms()):
        comparator = str((config.get("comparator") or {}).get("name", "-"))
        if config.get("generation_mode") == "centralized":
            comparator += " (central teacher)"
    values = str((config.get("generation") or {}).get("values", "catalog"))
    return Group(algorithm, comparator, layout, values)


def read_metrics(metrics: Path) -> tuple[list[tuple[int, dict[str, float]]], dict[str, list[float]]]:
    """The fixed-anchor curve ((env_step, eval/* without the prefix) per evaluation) and the train/* series."""
    curve: list[tuple[int, dict[str, float]]] = []
    series: dict[str, list[float]] = {}
    if not metrics.is_file():
        return curve, series
    for number, line in enumerate(metrics.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReportError(f"{metrics}, line {number}: not JSON ({exc.msg})") from None
        if "eval/reward" in record:
            values = {k[len("eval/"):]: float(v) for k, v in record.items() if k.startswith("eval/") and isinstance(v, (int, float))}
            curve.append((int(record["env_step"]), values))
        for key, value in record.items():
            if key.startswith("train/") and isinstance(value, (int, float)) and not isinstance(value, bool):
                series.setdefault(key[len("train/"):], []).append(float(value))
    return curve, series


def read_run(path: Path, iterative: Optional[set[str]] = None) -> Optional[RunSummary]:
    """The run at `path`, or None for a mode=dry or mode=eval directory (no training to report)."""
    try:
        config = yaml.safe_load((path / "config.yaml").read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ReportError(f"{path}/config.yaml: not YAML ({exc})") from None
    if not isinstance(config, dict) or "seed" not in config:
        raise ReportError(f"{path}/config.yaml: no seed (not a config this project wrote)")
    if (config.get("mode") or {}).get("name", "train") != "train":
        return None
    status_file = path / "status"
    lines = status_file.read_text(encoding="utf-8").splitlines() if status_file.is_file() else []
    curve, series = read_metrics(path / "metrics.jsonl")
    return RunSummary(
        path=path,
        group=group_of(config, path, iterative),
        seed=int(config["seed"]),
        status=lines[0] if lines else "no status",
        error=" ".join(lines[1:2]),
        curve=curve,
        held_out=read_held_out(path / "eval_final.json"),
        segments=read_segments(path / "run.json"),
        series=series,
    )


def read_segments(record: Path) -> list[dict[str, Any]]:
    """run.json's segments ([] without the file: a run from before it was written)."""
    if not record.is_file():
        return []
    try:
        segments = json.loads(record.read_text(encoding="utf-8"))["segments"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ReportError(f"{record}: not a run record ({exc})") from None
    if not all(isinstance(s, dict) and "wall_s" in s and "command" in s for s in segments):
        raise ReportError(f"{record}: a segment without wall_s or command")
    return segments


def read_held_out(eval_final: Path) -> dict[str, Any]:
    """The held-out groups of a terminal evaluation ({} without them, or without the file)."""
    if not eval_final.is_file():
        return {}
    try:
        return dict(json.loads(eval_final.read_text(encoding="utf-8")).get("held_out") or {})
    except json.JSONDecodeError as exc:
        raise ReportError(f"{eval_final}: not JSON ({exc.msg})") from None


def read_runs(paths: Iterable[str | Path]) -> list[RunSummary]:
    """Every training run at or under `paths`."""
    iterative = _iterative_algorithms()
    return [run for run in (read_run(path, iterative) for path in find_run_dirs(paths)) if run is not None]
