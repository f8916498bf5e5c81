"""Moving an idle actor off the GPU and back, as `hardware=1xb200` does around every update of the other actor.

Baseline: `model.to("cpu")` plus the optimizer state, through pageable memory (a fresh host allocation
every time). Against it: parking in a reusable pinned `HostStash` (`travel/agents/parking.py`). The actor
has AdamW state from one real update, so each round trip moves weights, moments and gradients' absence
exactly as training does. The first parked trip allocates the pinned memory and is reported apart.

    python bench/actor_offload.py                        # random_qwen3_4b on cuda:0
    python bench/actor_offload.py model=smollm2_135m --trips 5
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import torch
from hydra.utils import instantiate

from bench.measure import synchronize
from bench.project import compose_config
from travel.agents.devices import move_actor
from travel.agents.parking import HostStash, actor_slots, park, unpark

CPU = torch.device("cpu")


def actor_bytes(model: Any, optimizer: torch.optim.Optimizer) -> int:
    return sum(t.numel() * t.element_size() for t in (slot.get() for slot in actor_slots(model, optimizer)) if t is not None)


def one_update(model: Any, optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """One AdamW step on a short sequence: creates the moment buffers a parked actor carries."""
    ids = torch.arange(1, 65, device=device).reshape(1, -1)
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def time_trips(device: torch.device, trips: int, out: Callable[[], Any], back: Callable[[Any], None]) -> list[dict[str, float]]:
    results = []
    for _ in range(trips):
        synchronize(device)
        started = time.perf_counter()
        token = out()
        synchronize(device)
        parked = time.perf_counter()
        back(token)
        synchronize(device)
        results.append({"out_s": parked - started, "back_s": time.perf_counter() - parked})
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--trips", type=int, default=3, help="round trips per method")
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides (the model comes from `model=`)")
    args = parser.parse_args(argv)

    cfg = compose_config(args.overrides)
    device = torch.device(args.device)
    loaded = instantiate(cfg.model, _partial_=True)(device=str(device), gradient_checkpointing=False)
    model = loaded.model
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(cfg.algorithm.learning_rate))
    one_update(model, optimizer, device)
    moved = actor_bytes(model, optimizer)
    probe = [p.detach().to(CPU, copy=True) for p in model.parameters()]
    print(f"model {cfg.model.name} on {device}: {moved / 2**30:.2f} GiB of weights and AdamW state per move", flush=True)

    pageable = time_trips(device, args.trips, lambda: move_actor(model, optimizer, CPU), lambda _: move_actor(model, optimizer, device))
    stash = HostStash()
    pinned = time_trips(device, args.trips + 1, lambda: park(model, optimizer, stash), lambda parked: unpark(parked, stash))
    if not all(torch.equal(p.detach().cpu(), q) for p, q in zip(model.parameters(), probe)):
        raise SystemExit("the weights changed on the way: the moves are broken")

    rows = [("pageable model.to (baseline)", pageable), ("pinned stash, first trip (allocates)", pinned[:1]), ("pinned stash", pinned[1:])]
    baseline = _mean_trip(pageable)
    print("\n| method | out s | back s | round trip s | GB/s | vs baseline |\n| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, trips in rows:
        out_s = sum(t["out_s"] for t in trips) / len(trips)
        back_s = sum(t["back_s"] for t in trips) / len(trips)
        trip = out_s + back_s
        print(f"| {name} | {out_s:.2f} | {back_s:.2f} | {trip:.2f} | {2 * moved / trip / 1e9:.1f} | {baseline / trip:.2f}x |")
    if args.json:
        summary = {"model": str(cfg.model.name), "bytes_per_move": moved, "pageable": pageable, "pinned": pinned}
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


def _mean_trip(trips: list[dict[str, float]]) -> float:
    return sum(t["out_s"] + t["back_s"] for t in trips) / len(trips)


if __name__ == "__main__":
    raise SystemExit(main())
