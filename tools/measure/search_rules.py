"""The search's decisions as pure functions of what is on disk, so that ``replay`` re-derives each one offline.

- **Drop** (``first_look_drops``): from the first look (repeat 1 of every point), a candidate is dropped
  when at *every* concurrency its TPOT range lies wholly above the range of that level's best (ranges
  not overlapping, tools/measure/verdict.py ``ratio``: low of the ratio above 1). One repeat has no
  spread of its own, so a one-repeat point gets the widest spread the verdict does not flag as noisy
  (``NOISY`` of its median), centred on its value. The baseline is the reference and is never dropped.
- **Order of the extra repeats** (``survivors``): the baseline first, then the survivors by the
  geometric mean of their first-look TPOT over the levels, fastest first, so a budget that runs out
  leaves out the least promising.
"""
from __future__ import annotations

import math

from pydantic import BaseModel, Field

from tools.measure.results import BenchRecord
from tools.measure.verdict import BASELINE, NOISY, Spread, point_stats, ratio

TPOT = "median_tpot_ms"


class LevelEvidence(BaseModel):
    """The numbers that decided a drop at one concurrency (TPOT, ms)."""

    median: float
    low: float
    high: float
    best: str = Field(description="The level's best candidate on TPOT")
    best_low: float
    best_high: float
    ratio_low: float = Field(description="low of the ratio to the best: above 1, the ranges do not overlap")


class Drop(BaseModel):
    variant: str
    levels: dict[int, LevelEvidence]

    def text(self) -> str:
        return "; ".join(f"c{c}: {e.median:.3g} ms ({e.low:.3g}–{e.high:.3g}) vs {e.best} ({e.best_low:.3g}–"
                         f"{e.best_high:.3g})" for c, e in sorted(self.levels.items()))


def widened(spread: Spread) -> Spread:
    """A one-repeat point's range: NOISY of its median, centred on it; a measured range stays as it is."""
    if spread.n > 1:
        return spread
    half = spread.median * NOISY / 2
    return Spread(median=spread.median, low=spread.median - half, high=spread.median + half, n=spread.n)


def first_look(records: list[BenchRecord]) -> dict[int, dict[str, Spread]]:
    """concurrency -> variant -> TPOT of the first repeat (widened)."""
    out: dict[int, dict[str, Spread]] = {}
    for s in point_stats([r for r in records if r.repeat == 1]):
        if TPOT in s.metrics:
            out.setdefault(s.concurrency, {})[s.variant] = widened(s.metrics[TPOT])
    return out


def first_look_drops(records: list[BenchRecord], candidates: list[str], levels: list[int]) -> dict[str, Drop]:
    """Candidates measurably worse than the best at every level, with the numbers that decided it."""
    seen = first_look(records)
    if not levels or any(c not in seen for c in levels):
        return {}
    drops: dict[str, Drop] = {}
    for name in candidates:
        if name == BASELINE or any(name not in seen[c] for c in levels):
            continue
        evidence: dict[int, LevelEvidence] = {}
        for c in levels:
            best = min(sorted(seen[c]), key=lambda v: seen[c][v].median)
            r = ratio(seen[c][name], seen[c][best])
            if best == name or r is None or r.low <= 1:
                break
            mine, theirs = seen[c][name], seen[c][best]
            evidence[c] = LevelEvidence(median=mine.median, low=mine.low, high=mine.high, best=best,
                                        best_low=theirs.low, best_high=theirs.high, ratio_low=round(r.low, 6))
        else:
            drops[name] = Drop(variant=name, levels=evidence)
    return drops


def survivors(records: list[BenchRecord], candidates: list[str], dropped: set[str]) -> list[str]:
    """The baseline, then the candidates not dropped, fastest first-look TPOT (geometric mean) first."""
    seen = first_look(records)

    def mean(name: str) -> float:
        values = [lv[name].median for lv in seen.values() if name in lv and lv[name].median > 0]
        return math.exp(sum(map(math.log, values)) / len(values)) if values else math.inf

    rest = sorted((c for c in candidates if c != BASELINE and c not in dropped), key=lambda c: (mean(c), c))
    return ([BASELINE] if BASELINE in candidates else []) + rest
