"""The process-wide gate for side effects that must not begin after Ctrl-C (installing configs):
refused once ``request_stop()`` was called, waited for before the agent exits, never cut in half.
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
    """Yields when it began (wall time), stamped before the gate's check: so before ``request_stop()``."""
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
