"""Stops a re-driven attempt where the recorded one stopped: a kill, or Ctrl-C.

A recorded attempt that the agent did not finish on its own ends at an arbitrary point: the
lanes were wherever the kill or the signal found them. Re-driving it in full would make events
the record has only in the next attempt (and commit graph nodes that never committed), so the
replay holds each lane at its frontier, the first thing it would do past its recorded events:

- a decision event the record's attempt does not have (``admit``, called before the event is
  written, so nothing past the frontier reaches the replayed trace or the checkpoint);
- a step, span or LLM call whose result the record's attempt does not have (``freeze``).

Once every recorded decision of the attempt was reproduced (for an interrupted attempt, every
one but its ``run_finished``), the frontier is *reached*: a killed attempt ends as the kill
ended it (every held lane raises ``ReplayCut``, the graph unwinds, and what had committed stays
committed); an interrupted one gets the recorded signal (``SignalWatch.inject``), so the
campaign writes its ``interrupted`` result as it did, and then the held lanes are cut.
"""
from __future__ import annotations

import threading
from typing import Callable

FREEZE_LIMIT_S = 120.0  # a lane held longer than this means the replay can never reach the frontier


class ReplayCut(BaseException):
    """The recorded agent stopped here (killed or interrupted); the re-driven lane stops too."""


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
        """Cut every held lane (each raises ReplayCut and its node unwinds without committing)."""
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
        """Hold the calling lane (it is past the record) until the attempt ends, then raise ReplayCut."""
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
        """The frontier was reached: any lane still running is past what the record has."""
        return self.active and self.reached
