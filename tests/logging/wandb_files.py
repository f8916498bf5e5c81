"""Read an offline W&B run back from its `.wandb` transaction log (LevelDB log framing of protobuf Records).

W&B's own Python reader is gone from recent releases, so tests decode the file themselves: a 7-byte file
header (":W&B", magic 0xBEE1, version 0), then 32 KiB blocks of chunks, each with a 7-byte header
(crc32c, little-endian length, type FULL=1 / FIRST=2 / MIDDLE=3 / LAST=4).
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

from wandb.proto import wandb_internal_pb2 as pb

BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def read_records(path: str | Path) -> list[pb.Record]:
    data = Path(path).read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path}: not a W&B transaction log")
    records, pos, pending = [], 7, b""
    while pos + 7 <= len(data):
        block_left = BLOCK - pos % BLOCK
        if block_left < 7:
            pos += block_left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0 and length == 0:  # zero padding to the block end
            pos += block_left
            continue
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == FULL:
            pending = chunk
        elif kind == FIRST:
            pending = chunk
            continue
        elif kind == MIDDLE:
            pending += chunk
            continue
        elif kind == LAST:
            pending += chunk
        else:
            raise ValueError(f"{path}: unknown chunk type {kind} at byte {pos}")
        record = pb.Record()
        record.ParseFromString(pending)
        records.append(record)
        pending = b""
    return records


def history_rows(path: str | Path) -> list[dict]:
    """Each `wandb.log` call as a dict of key -> decoded value; `_history_step` is W&B's own step counter,
    which runs 0, 1, 2, ... unless some call passed an explicit `step=`."""
    rows = []
    for record in read_records(path):
        if record.WhichOneof("record_type") != "history":
            continue
        row = {}
        for item in record.history.item:
            key = item.key or "/".join(item.nested_key)
            row[key] = json.loads(item.value_json)
        if record.history.HasField("step"):
            row["_history_step"] = record.history.step.num
        rows.append(row)
    return rows


def metric_definitions(path: str | Path) -> dict[str, pb.MetricRecord]:
    out = {}
    for record in read_records(path):
        if record.WhichOneof("record_type") == "metric":
            out[record.metric.name or record.metric.glob_name] = record.metric
    return out


def offline_run_file(run_dir: str | Path, timeout_s: float = 60.0) -> Path:
    """The run's transaction log, once W&B's service has written its final `exit` record."""
    deadline = time.monotonic() + timeout_s
    while True:
        paths = sorted(Path(run_dir).glob("wandb/offline-run-*/run-*.wandb"))
        if len(paths) > 1:
            raise AssertionError(f"{run_dir}: expected one offline run, found {len(paths)}")
        if paths:
            try:
                if any(r.WhichOneof("record_type") == "exit" for r in read_records(paths[0])):
                    return paths[0]
            except ValueError:
                pass  # header not written yet
        if time.monotonic() > deadline:
            raise AssertionError(f"{run_dir}: no finished offline W&B run after {timeout_s} s")
        time.sleep(0.2)


def run_identity(path: str | Path) -> tuple[str, str, list[str]]:
    """The (name, group, tags) the run was started with, from its `run` record."""
    for record in read_records(path):
        if record.WhichOneof("record_type") == "run":
            return record.run.display_name, record.run.run_group, list(record.run.tags)
    raise AssertionError(f"{path}: no run record")
