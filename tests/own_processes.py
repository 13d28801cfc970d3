"""What a test may still signal when it cleans up: only processes it can prove are its own.

On a host whose pid_max is 32768, a suite that starts thousands of processes reuses pids and group
ids within minutes, so a number read from a ledger a while ago may by now name another test's
server. A pid is the test's while it has the start time seen when it started; a group, while its
leader's pid is gone or still has the recorded start time, and only for members started after it.
"""
from __future__ import annotations

import contextlib
import os
import signal

from tools.jobs import processes


def group_members_since(pgid: int, leader_start: str | int) -> list[int]:
    """Live members of the group led by (pid ``pgid``, start ``leader_start``); none once that
    number names another process's group."""
    leader = processes.start_time(pgid)
    if leader is not None and leader != str(leader_start):
        return []
    floor = int(leader_start)
    return [m for m in processes.group_members(pgid) if int(processes.start_time(m) or 0) >= floor]


class OwnPid:
    """A pid with the start time it had when the test saw it start."""

    def __init__(self, pid: int):
        self.pid, self.start = pid, processes.start_time(pid)

    def kill(self) -> None:
        if self.start is not None and processes.start_time(self.pid) == self.start:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
