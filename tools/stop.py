"""The process-wide "stop requested" gate for side effects that must not begin after Ctrl-C.

The agent's signal handler calls ``request_stop()``. Work that changes something outside the run
folder and cannot sensibly be cut in half (installing tuned configs into SGLang's folder) runs as
``with side_effect("installing configs"): ...``: it is refused once a stop was requested, and while
it runs ``wait_for_side_effects()`` (the agent, before it exits) waits for it to end, so nothing is
left half done by the agent's own exit and nothing starts after the first signal.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

_stop = threading.Event()
_running = threading.Lock()  # held while a side effect runs


class StopRequested(BaseException):
    """A side effect was about to start after a stop was requested (BaseException: no step swallows it)."""


def request_stop() -> None:
    _stop.set()


def stop_requested() -> bool:
    return _stop.is_set()


@contextmanager
def side_effect(what: str) -> Iterator[None]:
    with _running:
        if _stop.is_set():
            raise StopRequested(f"not {what}: the agent was asked to stop")
        yield


def wait_for_side_effects(timeout_s: float) -> bool:
    """Wait until no side effect runs (True), or ``timeout_s`` passed with one still running (False)."""
    if not _running.acquire(timeout=timeout_s):
        return False
    _running.release()
    return True


def reset() -> None:
    """Open the gate again, for a process that goes on after a stop (a replay re-creating an interrupt)."""
    _stop.clear()
