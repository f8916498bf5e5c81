"""Run `experiment=smoke actor=centralized` for every registered algorithm and check each run directory.

    python scripts/check_centralized_smoke.py [--out DIR] [--algorithms magrpo,madpo]

Per run: the joint actor was saved alone (`actors/joint`), the evaluations form the schedule's curve
(the first at env step 0, the terminal one equal to eval_final.json), every preference replay shard and
every pair in it is marked `centralized_joint` with one token sequence per candidate, and the iterative
methods wrote their reward distributions. Exits non-zero, naming the run and the check, on any failure.
CI runs it after the test suite (about six minutes on two cores).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def launch(run_dir: Path, algorithm: str) -> None:
    command = [
        sys.executable, str(ROOT / "launch.py"), "experiment=smoke", "actor=centralized",
        f"algorithm={algorithm}", f"hydra.run.dir={run_dir}",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{algorithm}: the run failed\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")


def check(run_dir: Path, iterative: bool, preference: bool) -> list[str]:
    problems = []
    config = (run_dir / "config.yaml").read_text()
    if "layout: centralized" not in config:
        problems.append("config.yaml does not record actor.layout=centralized")
    saved = sorted(p.name for p in (run_dir / "actors").iterdir() if not p.name.startswith("."))
    if saved != ["joint"]:
        problems.append(f"actors/ holds {saved}, expected the joint actor alone")
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [r["env_step"] for r in records if "eval/reward" in r]
    final = json.loads((run_dir / "eval_final.json").read_text())
    if len(evals) < 2 or evals[0] != 0 or evals[-1] != final["env_step"] or evals != sorted(evals):
        problems.append(f"eval points {evals} do not run from 0 to the terminal env step {final['env_step']}")
    shards = sorted((run_dir / "preference_replay").glob("iteration_*.json"))
    if preference and not shards:
        problems.append("no preference replay shard")
    for shard in shards:
        payload = json.loads(shard.read_text())
        kinds = {payload["kind"], *(pair["kind"] for pair in payload["pairs"])}
        if kinds != {"centralized_joint"}:
            problems.append(f"{shard.name}: record kinds {sorted(kinds)}, expected centralized_joint only")
        lengths = {len(pair[side]["sequences"]) for pair in payload["pairs"] for side in ("winner", "loser")}
        if payload["pairs"] and lengths != {1}:
            problems.append(f"{shard.name}: {sorted(lengths)} token sequences per candidate, expected 1 (the joint one)")
    distributions = sorted((run_dir / "reward_distributions").glob("iteration_*.json"))
    if iterative:
        if not distributions:
            problems.append("no reward distribution of the iteration")
        for path in distributions:
            counts = json.loads(path.read_text())["candidate"]
            if not counts["target"]["sample_count"] or not counts["comparator"]["sample_count"]:
                problems.append(f"{path.name}: empty target or comparator distribution")
    return problems


def main() -> int:
    from travel.algorithms.core.registry import registered, spec_named

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where the run directories go (default: a temp dir)")
    parser.add_argument("--algorithms", default=",".join(registered()), help="comma-separated algorithm names")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="centralized_smoke_"))
    failures = 0
    for algorithm in args.algorithms.split(","):
        spec = spec_named(algorithm)
        run_dir = out / algorithm
        launch(run_dir, algorithm)
        problems = check(run_dir, spec.config.iterative, spec.preference)
        for problem in problems:
            print(f"FAIL {algorithm}: {problem}")
        if not problems:
            print(f"ok   {algorithm}: {run_dir}")
        failures += bool(problems)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
