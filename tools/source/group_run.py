"""Run a short-lived helper in a process group of its own, and end the whole group on a timeout.

The SGLang interpreter (``--sglang-python``) is the user's program: it may be a wrapper script, and
what it starts (a ``python`` under ``conda run``, torch's compile workers) lives beside it. Killing
only the direct child on a timeout leaves those running, holding the output pipes open, so the
caller would also wait on them. Here the helper leads a new session (so its group is its own), a
timeout kills the group with SIGKILL, and the caller waits for the leader only.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tools.child_env import child_env


@dataclass
class Finished:
    returncode: int | None  # None: killed on the timeout
    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run_grouped(argv: list[str], timeout: float, env: dict[str, str] | None = None,
                cwd: Path | str | None = None) -> Finished:
    """``argv`` with its output captured; on ``timeout`` its whole process group is killed.
    OSError (no such program, not executable) is the caller's to report."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               text=True, env=child_env() if env is None else env, cwd=cwd,
                               start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(process.pid)
        out, err = _drain(process)
        return Finished(None, out, err)
    except BaseException:  # Ctrl-C while waiting: the helper must not outlive us either
        kill_group(process.pid)
        process.wait()
        raise
    return Finished(process.returncode, out, err)


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _drain(process: subprocess.Popen) -> tuple[str, str]:
    """What the killed group wrote before it died; every writer is gone, so the pipes reach EOF."""
    try:
        out, err = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:  # a member that left the group still holds a pipe: give up on it
        for stream in (process.stdout, process.stderr):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]
        process.wait()
        out, err = "", ""
    return out or "", err or ""
