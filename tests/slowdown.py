"""How long a test waits before it calls a wait hung: one knob for how busy the machine is.

Tests wait on events, files and process exits, never on the clock, and assert nothing about how
long anything took. A limit only says when a wait that should have ended is a hang; every limit
(subprocess timeouts, polling deadlines, pytest-timeout's per test) is a quiet machine's figure
times ``DSV4_TEST_SLOWDOWN`` (default 3: room for a 2-core machine shared with other work; CI or
a busier machine may set more, a developer chasing a hang less).
"""
from __future__ import annotations

import os
import time

SLOWDOWN_ENV = "DSV4_TEST_SLOWDOWN"
DEFAULT_SLOWDOWN = 3.0


def slowdown() -> float:
    raw = os.environ.get(SLOWDOWN_ENV, "").strip()
    if not raw:
        return DEFAULT_SLOWDOWN
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{SLOWDOWN_ENV}={raw!r} is not a positive number; set it to e.g. 3 (or unset it)")
    return value


def limit(seconds: float) -> float:
    """A quiet machine's ``seconds``, scaled for this one."""
    return seconds * slowdown()


def wait_for(predicate, seconds: float, what: str, interval: float = 0.05):
    """Poll ``predicate`` until it returns something truthy, which is returned; fail after
    ``limit(seconds)`` naming ``what`` was awaited."""
    deadline = time.monotonic() + limit(seconds)
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what} ({limit(seconds):g} s; {SLOWDOWN_ENV} scales it)")
        time.sleep(interval)


def until_accepted(call, refusal: str, seconds: float, what: str):
    """Call ``call`` until it stops failing with an error that says ``refusal``, and return what it
    returned; any other error is raised at once."""
    def attempt():
        try:
            return (call(),)
        except Exception as err:  # only the awaited refusal is retried
            if refusal not in str(err):
                raise
            return None
    return wait_for(attempt, seconds, what, interval=0.2)[0]
