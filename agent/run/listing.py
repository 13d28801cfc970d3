"""The runs under a runs folder: list them, and remove old finished ones.

A run is removed only when it has ``result.json`` (it is finished, planned, failed, ...) and its
lock can be taken: the lock is held while the folder is deleted, so no agent can start driving
it meanwhile. Unfinished runs (no result: crashed, or being driven) are never removed; they are
listed as kept, with the reason.
"""
from __future__ import annotations

import fcntl
import os
import re
import shlex
import shutil
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from tools import json_data
from agent.run.folder import RunFolderError, read_result
from agent.run.run_files import CONFIG, RESULT, RunFiles

UNREADABLE = "unreadable"  # the status of a run whose result.json or config.json is damaged
_AGE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """'7d', '12h', '30m', '90s', '2w' -> seconds; anything else is a usage error (ValueError)."""
    match = _AGE.match(text.strip())
    if not match:
        raise ValueError(f"--older-than takes a number and a unit s, m, h, d or w, e.g. 7d (got {text!r})")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


@dataclass
class RunEntry:
    name: str
    path: str
    goal: str | None
    status: str            # a result status, or "unfinished" / "running" (locked by a live agent)
    started_at: float
    finished_at: float | None
    locked_by: str | None

    @property
    def age_s(self) -> float:
        return time.time() - (self.finished_at or self.started_at)

    def data(self) -> dict:
        return {**asdict(self), "age_s": round(self.age_s, 1)}


def _started(path: Path) -> float:
    try:
        return datetime.strptime(path.name[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return path.stat().st_mtime


def _lock_holder(path: Path) -> str | None:
    """Who holds the run's lock now (None when nobody does); takes nothing."""
    lock = path / ".lock"
    if not lock.exists():
        return None
    try:
        fd = json_data.open_regular(lock, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # a FIFO or link placed as .lock: no agent holds a lock through it
        return None
    with open(fd) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return f.read().strip() or "another process"
        return None


def list_runs(runs_dir: Path) -> list[RunEntry]:
    entries = []
    for path in sorted(p for p in runs_dir.glob("*") if (p / CONFIG).is_file()):
        try:
            result = read_result(path / RESULT)
            config = RunFiles(path).config() or {}
        except RunFolderError:  # `status RUN` names the damaged file; here it is one word
            result, config = {"status": UNREADABLE}, {}
        holder = _lock_holder(path)
        status = result["status"] if result else ("running" if holder else "unfinished")
        entries.append(RunEntry(name=path.name, path=str(path), goal=config.get("goal"), status=status,
                                started_at=_started(path), finished_at=(result or {}).get("finished_at"),
                                locked_by=holder))
    return entries


def clean_runs(runs_dir: Path, older_than_s: float, dry_run: bool = False) -> tuple[list[RunEntry], list[dict]]:
    """Remove finished runs older than the age; returns (removed, kept with a reason)."""
    removed: list[RunEntry] = []
    kept: list[dict] = []
    for entry in list_runs(runs_dir):
        if entry.age_s < older_than_s:
            continue
        why = _why_keep(entry)
        if why is None and not dry_run:
            why = _remove_locked(Path(entry.path))
        if why is None:
            removed.append(entry)
        else:
            kept.append({**entry.data(), "why": why})
    return removed, kept


def _why_keep(entry: RunEntry) -> str | None:
    if entry.locked_by:
        return f"being driven by {entry.locked_by}"
    if entry.status == UNREADABLE:
        return f"its result.json is no result or its config.json is damaged: `dsv4-agent status {shlex.quote(str(entry.path))}` says which"
    if entry.finished_at is None:
        return "unfinished (no result.json): resume it, or remove the folder by hand"
    return None


def _remove_locked(path: Path) -> str | None:
    """Delete the folder while holding its lock; the reason it was kept otherwise."""
    if path.is_symlink():  # never a lock file made, nor a folder deleted, where the link points
        return f"a symbolic link (to {os.readlink(path)}), not a run folder: remove the link by hand"
    try:
        fd = json_data.open_regular(path / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW)
    except OSError as err:
        return f"cannot take its lock ({path / '.lock'}: {err.strerror}): remove that file by hand"
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "an agent started driving it just now"
        shutil.rmtree(path)
        return None
    except OSError as err:  # a read-only file system, a file of another user
        return f"cannot remove it: {err.strerror} ({err.filename}); remove it by hand"
    finally:
        os.close(fd)
