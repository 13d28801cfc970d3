"""Reading and writing a job ledger folder on this machine (LocalExecutor, SlurmExecutor).

Writers replace files atomically (write a temp file, fsync, rename), so a reader sees the old
file or the new one; a JSON file that does not parse is treated as "not there yet".
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from tools import json_data


def read_json(path: Path) -> dict | None:
    try:
        return json_data.read(path)
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def tail_log(folder: Path, max_chars: int) -> str:
    """The last ``max_chars`` bytes of the job's log (decoded leniently); '' before it exists."""
    try:
        with open(folder / "log.txt", "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - max_chars))
            return f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


_ERROR_WORDS = re.compile(r"error|exception|traceback|failed|refused|denied|not found|no such", re.I)


def last_error_line(log_tail: str, max_chars: int = 240) -> str:
    """Why a command failed, as its output says: the last line that reads like an error, stripped and
    capped; '' when none does."""
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    said = next((line for line in reversed(lines) if _ERROR_WORDS.search(line)), "")
    return said if len(said) <= max_chars else said[:max_chars - 1] + "…"


def ledger_keys(root: Path) -> list[str]:
    """Job keys with a ledger under ``root``, sorted."""
    if not root.is_dir():
        return []
    return [d.name for d in sorted(root.iterdir()) if (d / "job.json").exists()]


def record_stop_request(folder: Path, grace_s: float | None) -> float:
    """Write ``stop.json`` (so a dead job reads as stopped, not lost) and return the grace to use:
    the caller's, else the job's own, else the spec's default."""
    job = read_json(folder / "job.json") or {}
    write_json(folder / "stop.json", {"requested_at": time.time()})
    return job.get("grace_s", 10.0) if grace_s is None else grace_s
