"""The decode step's history on one H200: ms per step (prefill included) by commit, against the targets and floors.

Reads bench/results/decode_step_h200.csv (one row per measured commit, copied from docs/performance.md's rows of
`bench/generation.py --new-tokens 256`, 20 candidates and one, random Qwen3-4B, a 6,000-token prompt) and writes
docs/decode_step_h200.png:

    python bench/plot_decode_steps.py [--out docs/decode_step_h200.png]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "bench" / "results" / "decode_step_h200.csv"
SERIES = (("ms_per_step_20", "20 candidates", 4.0, 2.2), ("ms_per_step_1", "one candidate", 3.0, 2.1))


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for number, row in enumerate(rows, start=2):
        for column, *_ in SERIES:
            if row[column] and not 0 < float(row[column]) < 1000:
                raise ValueError(f"{path}:{number}: {column}={row[column]!r} is not a time in ms")
    return rows


def plot(rows: list[dict[str, str]], out: Path) -> None:
    figure, axis = plt.subplots(figsize=(10, 4.8))
    positions = range(len(rows))
    for (column, label, target, floor), color in zip(SERIES, ("tab:blue", "tab:orange")):
        points = [(x, float(row[column])) for x, row in zip(positions, rows) if row[column]]
        axis.plot(*zip(*points), marker="o", color=color, label=f"{label}")
        axis.axhline(target, color=color, linestyle="--", linewidth=1, label=f"{label}: target {target:g} ms")
        axis.axhline(floor, color=color, linestyle=":", linewidth=1, label=f"{label}: a step's bandwidth floor {floor:g} ms")
    axis.set_xticks(list(positions), [f"{row['commit']}\n{row['change']}" for row in rows], rotation=60, ha="right",
                    fontsize=7)
    axis.set_ylabel("ms per step (prefill included)")
    axis.set_ylim(bottom=0)
    axis.set_title("Decode step, random Qwen3-4B, 6,000-token prompt, 256 new tokens, one H200")
    axis.legend(fontsize=7, ncol=3)
    axis.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "decode_step_h200.png")
    args = parser.parse_args(argv)
    plot(read_rows(args.results), args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
