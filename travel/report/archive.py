"""`python -m travel.report.archive RUN... --into DIR`: the small files of finished runs, kept where a report
can be rebuilt from them (`docs/results/runs/` holds the study's, which `docs/results.md` is built from).

Each run goes to `DIR/<experiment>_seed<N>/`: `config.yaml`, `status`, `metrics.jsonl`, `run.json` and
`eval_final.json` without its per-row samples (the panel means and the held-out groups stay), which is what
travel/report/runs.py reads. The experiment is the run's `experiment=` choice (`.hydra/hydra.yaml`); a run
without one is named after its algorithm. An archived run is never overwritten. With `--placeholders`, the
run's data.path and model.path become the README's `/path/to/train.jsonl` and `/dir/with/the/gguf` in the
archived config and commands, so that a committed record names no machine's directories. With
`--runs-together N`, each segment of the archived `run.json` records that N runs shared the card (a run cannot
see the others, so whoever launched them says so), which the report shows beside the run's minutes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

import yaml

from travel.io import write_text_atomic
from travel.report.runs import ReportError, find_run_dirs, read_run

COPIED = ("config.yaml", "status", "metrics.jsonl", "run.json")
SAMPLE_KEYS = ("samples", "held_out_samples")  # per-row texts and scores: large, and not read by the report
PLACEHOLDERS = {("data", "path"): "/path/to/train.jsonl", ("model", "path"): "/dir/with/the/gguf"}


def experiment_of(run_dir: Path) -> Optional[str]:
    hydra = run_dir / ".hydra" / "hydra.yaml"
    if not hydra.is_file():
        return None
    choices = ((yaml.safe_load(hydra.read_text(encoding="utf-8")) or {}).get("hydra") or {}).get("runtime", {}).get("choices", {})
    return choices.get("experiment")


def replaced_paths(run_dir: Path) -> dict[str, str]:
    """The run's own data and model paths, each mapped to the README's placeholder."""
    config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    found = {}
    for (group, key), placeholder in PLACEHOLDERS.items():
        value = (config.get(group) or {}).get(key)
        if value:
            found[str(value)] = placeholder
    return found


def archive_run(run_dir: Path, into: Path, placeholders: bool = False, runs_together: Optional[int] = None) -> Path:
    """Copy one complete run's report files into `into`; returns the new directory. `runs_together`: how many
    runs shared the card with this one included, written into every segment of the archived run.json."""
    if runs_together is not None and runs_together < 1:
        raise ReportError(f"--runs-together={runs_together}: must be >= 1 (the run itself counts)")
    run = read_run(run_dir)
    if run is None or not run.complete:
        state = "not a training run" if run is None else run.status
        raise ReportError(f"{run_dir}: not a complete training run ({state}); only finished runs are archived")
    missing = [name for name in COPIED if not (run_dir / name).is_file()]
    if missing:
        raise ReportError(f"{run_dir}: no {', '.join(missing)} (a run from before run.json was written?)")
    target = into / f"{experiment_of(run_dir) or run.group.algorithm}_seed{run.seed}"
    if target.exists():
        raise ReportError(f"{target} already exists: remove it to archive {run_dir} again")
    target.mkdir(parents=True)
    replacements = replaced_paths(run_dir) if placeholders else {}
    for name in COPIED:
        text = (run_dir / name).read_text(encoding="utf-8")
        for path, placeholder in sorted(replacements.items(), key=lambda item: -len(item[0])):
            text = text.replace(path, placeholder)
        if name == "run.json" and runs_together is not None:
            record = json.loads(text)
            record["segments"] = [{**segment, "runs_together": runs_together} for segment in record["segments"]]
            text = json.dumps(record, indent=2) + "\n"
        write_text_atomic(target / name, text)
    final = json.loads((run_dir / "eval_final.json").read_text(encoding="utf-8"))
    kept = {key: value for key, value in final.items() if key not in SAMPLE_KEYS}
    write_text_atomic(target / "eval_final.json", json.dumps(kept, indent=1) + "\n")
    return target


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m travel.report.archive", description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="run directories, or folders holding them")
    parser.add_argument("--into", required=True, help="where the archived runs go (e.g. docs/results/runs)")
    parser.add_argument("--placeholders", action="store_true", help="write data.path and model.path as the README does")
    parser.add_argument("--runs-together", type=int, default=None, metavar="N",
                        help="N runs shared the card at once (this one included); recorded in run.json")
    args = parser.parse_args(argv)
    try:
        for run_dir in find_run_dirs(args.paths):
            target = archive_run(run_dir, Path(args.into), args.placeholders, args.runs_together)
            print(f"archived {run_dir} -> {target}")
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
