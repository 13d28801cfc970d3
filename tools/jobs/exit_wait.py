"""A sleep between polls of jobs that wakes as soon as a job's exit record appears (the tuning fan-out,
the benchmark points): the work after a job starts within a tick of its end."""
from __future__ import annotations

import time

from tools.jobs.executor import Executor

ExitStamp = tuple[int, int] | None  # (inode, mtime) of a job's exit record; None while it has none


def exit_stamp(executor: Executor, key: str) -> ExitStamp:
    try:
        stat = (executor.job_dir(key) / "exit.json").stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def sleep_until_an_exit(executor: Executor, seen: dict[str, ExitStamp], poll_s: float) -> None:
    """Sleep up to ``poll_s``; wake once a job's exit record differs from the one ``seen`` before its poll
    (an exit between the poll and this sleep counts; an earlier run's record counts once replaced). Remote
    executors copy records back only when polled: for them, a plain sleep."""
    deadline = time.monotonic() + poll_s
    while time.monotonic() < deadline:
        if any(exit_stamp(executor, key) != stamp for key, stamp in seen.items()):
            return
        time.sleep(0.05)
