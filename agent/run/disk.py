"""A full disk under the run folder: noticed wherever it strikes, ended in one line and a result.

Any write can meet ENOSPC, EDQUOT or SQLite's "database or disk is full"; the campaign then ends
``failed`` (``disk_full``) naming the folder and the room it needs. Each attempt keeps a small
reserve file (``.disk-reserve``) and deletes it first, so that last word fits. A trace event that
did not fit is cut off again and run files are replaced atomically, so ``resume`` goes on from the
last whole event once there is room.
"""
from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from pathlib import Path

RESERVE_FILE = ".disk-reserve"
RESERVE_BYTES = 256 << 10  # the last events, result.json and the closing checkpoint fit in it
MIN_FREE_BYTES = 1 << 20   # what an attempt needs free to begin: its trace, outcomes and checkpoint grow
DISK_FULL = "disk_full"    # result.json's and run_finished's reason
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class DiskFull(OSError):
    """The disk holding the run folder is full (raised where a replay re-creates that end)."""

    def __init__(self, message: str = "no space left on the disk holding the run folder"):
        super().__init__(errno.ENOSPC, message)


def is_disk_full(err: BaseException | None) -> bool:
    """Whether ``err``, or an error it was raised from or during, is a full disk (or quota)."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in _FULL_ERRNOS:
            return True
        if isinstance(err, sqlite3.OperationalError) and "disk is full" in str(err):
            return True
        err = err.__cause__ or err.__context__
    return False


def free_bytes(folder: Path) -> int | None:
    try:
        room = os.statvfs(folder)
    except OSError:
        return None
    return room.f_bavail * room.f_frsize


def human(size: int | None) -> str:
    if size is None:
        return "unknown"
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)


def no_space(folder: Path, free: int | None = None) -> str:
    """One line for the person: the folder, the room it needs (and, when given, the room it has)."""
    has = f" ({human(free)} free)" if free is not None else ""
    return f"no space left on the disk holding {folder}{has}: free at least {human(MIN_FREE_BYTES)} there"


def too_full(folder: Path) -> str | None:
    """Why an attempt cannot begin in ``folder`` (its disk has less than MIN_FREE_BYTES free), or None."""
    free = free_bytes(folder)
    return no_space(folder, free) if free is not None and free < MIN_FREE_BYTES else None


def keep_reserve(run_path: Path) -> None:
    """Set aside room for the attempt's last word; a disk too full for it gets none (noticed at the end)."""
    path = run_path / RESERVE_FILE
    try:
        with open(path, "wb") as f:
            f.write(b"\0" * RESERVE_BYTES)  # real blocks: a sparse file would free nothing
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        with contextlib.suppress(OSError):
            path.unlink()


def release_reserve(run_path: Path) -> None:
    with contextlib.suppress(OSError):
        (run_path / RESERVE_FILE).unlink()
