"""Short outages of what answers for remote jobs (slurmctld, sshd): retried with backoff, then named.

A status call that fails because the other side does not answer (Slurm's "Unable to contact slurm
controller", a command that does not answer at all) raises ``Unreachable``; ``OutageWait.call``
tries it again with growing pauses for up to ``total_s`` from the first failure (the
``outage_wait_s`` setting), saying on each retry what it waits for. The window is the outage's,
not the call's: it opens at the first failure of any call and closes at the next answer, so calls
that fail one after another through the same outage share one bound. Past that, one ToolError names
what did not answer and the fix. Other failures (an unknown job, a refused request) are not
retried: waiting would not change them. Jobs keep running through an outage; only our view of
them pauses.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from tools.base import ToolError

DEFAULT_OUTAGE_WAIT_S = 120.0
FIRST_PAUSE_S = 1.0
MAX_PAUSE_S = 15.0
T = TypeVar("T")


class Unreachable(ToolError):
    """The call failed because ``where`` did not answer; worth trying again. ``unsent``: the call
    provably never reached it (the connection was refused or closed before the request went out)."""

    def __init__(self, message: str, where: str, fix: str, unsent: bool = False):
        super().__init__(message)
        self.where, self.fix, self.unsent = where, fix, unsent


@dataclass
class OutageWait:
    total_s: float = DEFAULT_OUTAGE_WAIT_S
    notify: Callable[[str], None] | None = None  # one progress line per retry (the agent's live view)
    outage_since: float | None = None  # monotonic time of the outage's first failure; None while answered

    def call(self, what: str, attempt: Callable[[], T]) -> T:
        pause, retries = FIRST_PAUSE_S, 0
        while True:
            try:
                answer = attempt()
            except Unreachable as err:
                now = time.monotonic()
                if self.outage_since is None:
                    self.outage_since = now
                left = self.total_s - (now - self.outage_since)
                if left <= 0:
                    raise ToolError(f"{err.where} did not answer {what} for {self.total_s:g} s ({err}); the jobs "
                                    f"keep running: {err.fix}, then `dsv4-agent resume RUN` (--outage-wait SECONDS "
                                    "waits longer)") from None
                retries += 1
                pause = min(pause, left)
                self._say(f"{err.where} does not answer {what}; retry {retries} in {pause:g} s "
                          f"(giving up {left:.0f} s from now)")
                time.sleep(pause)
                pause = min(pause * 2, MAX_PAUSE_S)
                continue
            self.outage_since = None  # answered: the next failure opens a new outage
            if retries:
                self._say(f"{what}: answered again after {retries} retries")
            return answer

    def _say(self, line: str) -> None:
        if self.notify is not None:
            self.notify(line)
