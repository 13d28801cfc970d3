"""Stops a re-driven attempt where the recorded one stopped (a kill or Ctrl-C).

Re-driven in full, it would write events and commit nodes the record has only in the next attempt,
so each lane is held at its frontier: a decision event the record lacks (``admit``, before it is
written) or a step, span or LLM call whose result it lacks (``freeze``). Once every recorded
decision is reproduced, the held lanes are cut (``ReplayCut``), after the recorded signal if any.
"""
from __future__ import annotations

import threading
from typing import Callable

FREEZE_LIMIT_S = 120.0  # held this long: the replay cannot reach the frontier


class ReplayCut(BaseException):
    """The recorded agent stopped here; the re-driven lane stops too."""


class Frontier:
    """Holds lanes of the current attempt past the record; one per replay, re-armed per attempt."""

    def __init__(self) -> None:
        self._released = threading.Event()
        self._lock = threading.Lock()
        self.active = False             # the current attempt stops early (killed or interrupted)
        self.reached = False
        self.on_reached: Callable[[], None] = lambda: None
        self.held: list[str] = []

    def arm(self, stops_early: bool, on_reached: Callable[[], None]) -> None:
        with self._lock:
            self._released.clear()
            self.active, self.reached, self.on_reached, self.held = stops_early, False, on_reached, []

    def release(self) -> None:
        """Cut every held lane: each raises ReplayCut and its node unwinds uncommitted."""
        self._released.set()

    def disarm(self) -> None:
        """After the attempt: cut whatever is still held, hold nothing more."""
        self.release()
        with self._lock:
            self.active = False

    def reach(self) -> None:
        """Every recorded decision of the attempt was reproduced: end it as the record ended it."""
        with self._lock:
            if not self.active or self.reached:
                return
            self.reached = True
        self.on_reached()

    def freeze(self, where: str, all_matched: Callable[[], bool]) -> None:
        """Hold the calling lane, past the record, until the attempt ends; then raise ReplayCut."""
        with self._lock:
            self.held.append(where)
        if all_matched():
            self.reach()
        if not self._released.wait(FREEZE_LIMIT_S):
            raise ReplayCut(f"held at {where} for {FREEZE_LIMIT_S:g} s without reaching where the recorded "
                            "attempt stopped")
        raise ReplayCut(f"the recorded agent stopped before {where}")

    @property
    def past(self) -> bool:
        """The frontier was reached: a lane still running is past the record."""
        return self.active and self.reached
