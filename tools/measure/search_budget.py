"""The GPU-time budget of a search (``--budget 90m``) and the costs it is spent on.

A budget is a duration: a number with a unit s, m or h (``90m``, ``2h``, ``5400s``); a bare number is
seconds (how the run's recorded settings hold it). It counts the time the search's servers hold the
GPUs. Before any job the only cost known is the prior of a server start (``START_PRIOR_S``: a DeepSeek
server loads its weights for minutes), so a budget below it is refused, naming it. Once the first
points are measured, ``Costs`` holds what a server start and one repeat at each concurrency took on
this host, and ``estimate`` prices the work left with them.
"""
from __future__ import annotations

import re

from pydantic import BaseModel, Field

START_PRIOR_S = 300.0  # what a server start is assumed to cost before one is seen (the budget's minimum)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$")
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def budget_seconds(raw: object) -> float | None:
    """``90m`` -> 5400.0; None stays None; a budget of 0, a negative one or one below a server start is a
    ValueError naming the minimum."""
    if raw is None or raw == "":
        return None
    text = str(raw)
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"takes a duration with a unit s, m or h, e.g. 90m or 2h (got {text!r}); it must be more "
                         f"than one server start ({minimum_text()})")
    seconds = float(match[1]) * _UNIT[match[2]]
    if seconds < START_PRIOR_S:
        raise ValueError(f"{text.strip()} is less than one server start: the minimum is {minimum_text()} "
                         "(a server loads the model before any point is measured); give at least that, e.g. 90m")
    return seconds


def budget_text(raw: object) -> str | None:
    """The setting as it is kept (``5400s``), checked as ``budget_seconds`` checks it."""
    seconds = budget_seconds(raw)
    return None if seconds is None else f"{seconds:g}s"


def minimum_text() -> str:
    return f"{START_PRIOR_S / 60:g}m"


def duration_text(seconds: float) -> str:
    return f"{seconds / 60:.1f}m" if seconds >= 60 else f"{seconds:.1f}s"


class Costs(BaseModel):
    """What one server start and one repeat of a point at each concurrency took on this host."""

    start_s: list[float] = Field(default_factory=list, description="Seen server starts, launch to ready")
    run_s: dict[int, list[float]] = Field(default_factory=dict, description="concurrency -> seen repeat times")

    def start(self) -> float:
        return sum(self.start_s) / len(self.start_s) if self.start_s else START_PRIOR_S

    def run(self, concurrency: int) -> float | None:
        seen = self.run_s.get(concurrency) or [t for ts in self.run_s.values() for t in ts]
        return sum(seen) / len(seen) if seen else None

    def known(self) -> bool:
        return bool(self.start_s) and bool(self.run_s)

    def summary(self) -> dict:
        return {"server_start_s": round(self.start(), 3),
                "repeat_s": {str(c): round(self.run(c) or 0.0, 3) for c in sorted(self.run_s)}}


def estimate(costs: Costs, starts: int, runs: dict[int, int]) -> float:
    """Seconds for ``starts`` server starts and ``runs`` repeats per concurrency, at the costs seen so far (a
    concurrency not seen yet is priced at the mean of those seen; none seen: zero, starts only)."""
    return starts * costs.start() + sum(n * (costs.run(c) or 0.0) for c, n in runs.items())
