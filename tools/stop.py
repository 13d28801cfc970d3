"""The process-wide "stop requested" gate for side effects that must not begin after Ctrl-C.

Work outside the run folder that cannot be cut in half (installing tuned configs) runs under
``side_effect(...)``: refused once ``request_stop()`` was called, and waited for by
``wait_for_side_effects()`` before the agent exits, so nothing is left half done.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

_stop = threading.Event()
_running = threading.Lock()  # held while a side effect runs


class StopRequested(BaseException):
    """A side effect was refused after a stop (BaseException: no step swallows it)."""


def request_stop() -> None:
    _stop.set()


def stop_requested() -> bool:
    return _stop.is_set()


@contextmanager
def side_effect(what: str) -> Iterator[float]:
    """Yields when the side effect began (wall time), stamped before the gate is checked: one let
    through began before ``request_stop()``, so before any time the agent takes after it."""
    with _running:
        began_at = time.time()
        if _stop.is_set():
            raise StopRequested(f"not {what}: the agent was asked to stop")
        yield began_at


def wait_for_side_effects(timeout_s: float) -> bool:
    """Wait until no side effect runs (True), or ``timeout_s`` passed with one still running (False)."""
    if not _running.acquire(timeout=timeout_s):
        return False
    _running.release()
    return True


def reset() -> None:
    """Open the gate again (a replay goes on after re-creating an interrupt)."""
    _stop.clear()
