"""Atomic writes shared by every layer: a reader sees either the old file or directory or the complete new one.

A file is filled under a temporary name beside the target, flushed to disk and renamed over it. A directory
(a saved model, a checkpoint) is filled as a new version beside the target, and the target is a symlink that
one rename points at the new version. On any error the temporary part is removed and the old one stays; a full
disk is named as such (`DiskFullError`, errno ENOSPC, with the path), whichever library's writer ran out of
room. Every file gets the mode the process's umask gives a new file.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

_UMASK = os.umask(0)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK  # what open() gives a new file; mkstemp's own is 0600


class DiskFullError(OSError):
    """A write that ran out of room on its device; what was complete before it stays complete."""


def _ran_out_of_room(error: BaseException) -> bool:
    """Whether `error` (or what it was raised from or during) is a full device: torch's and safetensors' writers
    wrap the OSError, or only keep its text."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno == errno.ENOSPC or "No space left on device" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


@contextmanager
def naming_a_full_disk(path: Path) -> Iterator[None]:
    """Re-raise a full device met in the body as a DiskFullError naming `path`."""
    try:
        yield
    except DiskFullError:
        raise
    except Exception as error:
        if not _ran_out_of_room(error):
            raise
        raise DiskFullError(
            errno.ENOSPC, f"no space left on the device holding {path} (ENOSPC): it was not written, and what was "
            "complete before stays complete", str(path),
        ) from error


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path`; whatever the body writes there replaces `path` when the body returns."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(handle, FILE_MODE)
    os.close(handle)
    try:
        with naming_a_full_disk(path):
            yield Path(temporary)
            with open(temporary, "rb+") as stream:
                os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> Path:
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")
    return Path(path)


def write_json_atomic(path: str | Path, payload: Any, *, indent: int | None = None) -> Path:
    """Compact JSON by default; `indent` gives a human-readable file ending in a newline."""
    if indent is None:
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    else:
        text = json.dumps(payload, indent=indent, ensure_ascii=False) + "\n"
    return write_text_atomic(path, text)


def _sibling(path: Path, tag: str) -> Path:
    """A hidden, unique name beside `path`."""
    import uuid

    return path.parent / f".{path.name}.{tag}{uuid.uuid4().hex[:12]}"


@contextmanager
def _filled_directory(path: Path, tag: str) -> Iterator[Path]:
    """A new hidden directory beside `path` for the body to fill; removed if the body fails."""
    import shutil

    path.parent.mkdir(parents=True, exist_ok=True)
    directory = _sibling(path, tag)
    directory.mkdir()
    try:
        with naming_a_full_disk(path):
            yield directory
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    for file in directory.rglob("*"):  # some writers (safetensors) create their files 0600
        if file.is_file() and not file.is_symlink():
            os.chmod(file, FILE_MODE)


@contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """A directory written once: the body fills a hidden temporary directory beside `path`, which is renamed
    to `path` when the body returns. A kill leaves the older `path`, no `path`, or the complete new one (an
    older `path` is renamed aside, then removed; use `versioned_directory` for a directory saved over again)."""
    path = Path(path)
    with _filled_directory(path, "partial-") as partial:
        yield partial
    if path.exists() or path.is_symlink():
        # renamed aside in one step, never deleted in place: a kill during the deletion must not leave a
        # half-deleted directory under the name
        aside = _sibling(path, "replaced-")
        os.rename(path, aside)
        os.rename(partial, path)
        remove_directory(aside)
    else:
        os.rename(partial, path)


@contextmanager
def versioned_directory(path: str | Path) -> Iterator[Path]:
    """A directory saved over again (final actors): a fresh version beside `path` for the body to fill; when
    the body returns, `path` becomes a symlink to it in one rename, and the version it replaced is removed. A
    kill at any point leaves `path` as it was (the previous version, or nothing) or pointing at the complete
    new one; a leftover partial version only takes space. A real directory already at `path` (not made here)
    is moved aside first."""
    import shutil

    path = Path(path)
    with _filled_directory(path, "") as version:
        yield version
    previous = path.resolve() if path.is_symlink() else None
    if path.exists() and not path.is_symlink():
        aside = _sibling(path, "replaced-")
        os.replace(path, aside)
        previous = aside
    link = _sibling(path, "link-")
    os.symlink(version.name, link)
    os.replace(link, path)
    if previous is not None and previous != version.resolve() and previous.exists():
        shutil.rmtree(previous, ignore_errors=True)


def remove_directory(path: str | Path) -> None:
    """Remove a directory written here: a link and the version it points at, or a plain directory."""
    import shutil

    path = Path(path)
    if path.is_symlink():
        target = path.resolve()
        path.unlink()
        shutil.rmtree(target, ignore_errors=True)
    elif path.exists():
        shutil.rmtree(path)
