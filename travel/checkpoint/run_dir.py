"""The run directory's own records: who may use it, what state its run is in, and the run's console log.

- `claim`: a directory that already holds a run (a `status` file, `metrics.jsonl` or `dry_run.json`) is
  refused unless the run resumes (resume=auto or resume=<path>), so nothing is appended to or overwritten
  without a word.
- `status`: `running` while the mode runs, then `completed`; `stopped` with what stopped it and the checkpoint
  it wrote, for a run stopped as asked (SIGTERM, a Slurm requeue); or `failed` followed by the error's type and
  message (the traceback goes to launch.log).
- `launch.log`: everything the run prints (stdout and stderr, progress-bar refreshes left out).
- `run.json`: one segment per start of the run (a resumed run has several): the command, when it started, its
  wall seconds, how it ended and the CUDA devices it used, so that a report can give each run's command, card
  and device minutes. A job of a sweep records the single run's command (its own overrides), not the sweep's
  or the launcher's worker's command line.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Optional, TextIO

from travel.checkpoint.signals import RunInterrupted
from travel.io import write_text_atomic

STATUS_FILE = "status"
LOG_FILE = "launch.log"
RECORD_FILE = "run.json"
RUNNING, COMPLETED, STOPPED, FAILED = "running", "completed", "stopped", "failed"
RUN_MARKERS = (STATUS_FILE, "metrics.jsonl", "dry_run.json")


class RunDirectoryInUse(RuntimeError):
    """The run directory already holds a run and the run does not resume it."""


def read_status(run_dir: str | Path) -> Optional[str]:
    """The first line of the run's status file (running | completed | stopped | failed), or None without one."""
    path = Path(run_dir) / STATUS_FILE
    return path.read_text().splitlines()[0] if path.is_file() and path.read_text() else None


def claim(run_dir: str | Path, *, resuming: bool) -> None:
    """Refuse a directory that holds a run unless this run resumes it."""
    run_dir = Path(run_dir)
    found = [name for name in RUN_MARKERS if (run_dir / name).exists()]
    if found and not resuming:
        state = read_status(run_dir) or "no status"
        raise RunDirectoryInUse(
            f"{run_dir} already holds a run ({', '.join(found)}; status: {state}): continue it with resume=auto "
            f"(or resume=<checkpoint dir>), or give another hydra.run.dir"
        )


def write_status(run_dir: str | Path, state: str, error: Optional[BaseException] = None) -> None:
    text = state if error is None else f"{state}\n{type(error).__name__}: {error}"
    write_text_atomic(Path(run_dir) / STATUS_FILE, text + "\n")


def cuda_devices() -> list[str]:
    """The names of the CUDA devices, where this process initialised CUDA; [] otherwise (a CPU run, a dry run)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return []
    return [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())]


def append_segment(run_dir: str | Path, segment: dict) -> None:
    """Add one start of the run to run.json (created on the first)."""
    path = Path(run_dir) / RECORD_FILE
    record = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"segments": []}
    record["segments"].append(segment)
    write_text_atomic(path, json.dumps(record, indent=2) + "\n")


class _Tee:
    """Writes to the console stream and to the log file; progress-bar refreshes (carriage returns, cursor moves)
    stay off the file, and so does the line end a closing bar writes after its last refresh."""

    def __init__(self, console: TextIO, log: TextIO):
        self.console, self.log = console, log
        self._after_refresh = False

    def write(self, text: str) -> int:
        self.console.write(text)
        refresh = "\r" in text or "\x1b[" in text
        if not refresh and not (self._after_refresh and text.strip() == ""):
            self.log.write(text)
            self.log.flush()
        self._after_refresh = refresh or (self._after_refresh and text.strip() == "")
        return len(text)

    def flush(self) -> None:
        self.console.flush()
        self.log.flush()

    def __getattr__(self, name):
        return getattr(self.console, name)


@contextlib.contextmanager
def recorded(run_dir: str | Path, command: Optional[str] = None) -> Iterator[None]:
    """Status `running` for the body, then `completed`, `stopped` (a requested stop, its checkpoint written) or
    `failed` with the error (re-raised); the body's output is copied into launch.log, and the segment goes to
    run.json with `command` (default: this process's command line)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_status(run_dir, RUNNING)
    started, clock, ended = datetime.now(timezone.utc), time.monotonic(), FAILED
    with (run_dir / LOG_FILE).open("a", encoding="utf-8") as log:
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Tee(stdout, log), _Tee(stderr, log)
        try:
            yield
            ended = COMPLETED
        except RunInterrupted as stopped:
            ended = STOPPED
            log.write(f"{STOPPED}: {type(stopped).__name__}: {stopped}\n")  # as asked: no traceback
            write_status(run_dir, STOPPED, stopped)
            raise
        except BaseException as exc:
            log.write(traceback.format_exc())
            write_status(run_dir, FAILED, exc)
            raise
        finally:
            sys.stdout, sys.stderr = stdout, stderr
            append_segment(run_dir, {
                "command": command or shlex.join(["python", *sys.argv]),
                "started": started.isoformat(timespec="seconds"),
                "wall_s": round(time.monotonic() - clock, 1),
                "ended": ended,
                "devices": cuda_devices(),
            })
    write_status(run_dir, COMPLETED)
