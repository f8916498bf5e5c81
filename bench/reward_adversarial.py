"""Adversarial action text: seconds to score one joint action per family (tests/reward/adversarial_families.py)
at the parser's cap (travel.task.actions.MAX_ACTION_CHARS), at 1 MiB and at 50 MiB, against an all-dash action of the
same row measured in the same run, and the slowest family's seconds per MB of text.

    python bench/reward_adversarial.py [--data ../shared/data/travelplanner/train.jsonl] [--sizes 32768,1048576,52428800]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.reward.adversarial_families import FAMILIES  # noqa: E402
from travel.data import load_rows  # noqa: E402
from travel.reward import score_joint_action  # noqa: E402
from travel.task.actions import MAX_ACTION_CHARS  # noqa: E402
from travel.task.fields import owned_slots  # noqa: E402
from travel.task.roles import format_action  # noqa: E402

DEFAULT_DATA = REPO_ROOT / ".." / "shared" / "data" / "travelplanner" / "train.jsonl"


def seconds(row, actions, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        score_joint_action(row, actions)
        best = min(best, time.perf_counter() - started)
    return best


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sizes", default=f"{MAX_ACTION_CHARS},{1 << 20},{50 << 20}")
    args = parser.parse_args(argv)
    row = load_rows(str(args.data))[0]
    dash = [format_action(a, [(d, f, "-") for d, f in owned_slots(a, row.days)]) for a in range(2)]
    baseline = seconds(row, dash, repeats=20)
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"baseline: all-dash joint action of row {row.source_index}, {baseline * 1e3:.2f} ms")
    print("| family | " + " | ".join(f"{size:,} chars: s (x baseline)" for size in sizes) + " |")
    print("| --- | " + " | ".join("---:" for _ in sizes) + " |")
    worst, slowest = (0.0, "", 0), (0.0, "")
    for name, make in sorted(FAMILIES.items()):
        cells = []
        for size in sizes:
            took = max(seconds(row, [make(size), dash[1]], 1), seconds(row, [dash[0], make(size)], 1))
            cells.append(f"{took:.3f} ({took / baseline:.0f}x)")
            per_mb = took / (size / (1 << 20))
            worst = max(worst, (per_mb, name, size))
            if size == max(sizes):
                slowest = max(slowest, (took, name))
        print(f"| {name} | " + " | ".join(cells) + " |")
    per_mb, name, size = worst
    print(f"slowest family: {name}, {per_mb:.3f} s per MB of text (at {size:,} chars)")
    print(f"slowest joint action at {max(sizes):,} chars: {slowest[1]}, {slowest[0]:.3f} s (the scans read at most "
          f"{MAX_ACTION_CHARS:,} chars of any action)")


if __name__ == "__main__":
    main()
