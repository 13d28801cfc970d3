"""The decision: which variant to deploy, per concurrency and overall, from repeated measurements.

Each point (variant, concurrency) ran ``repeats`` times on one server; a metric's figure is the
median of the repeats and its spread the range [lowest, highest]. A ratio to the baseline carries
the spread of both: ``[low_v / high_b, high_v / low_b]``. When that range holds 1 the difference
is within the noise: "no measurable difference". A point whose repeats spread by more than
``NOISY`` of their median is flagged noisy.

Per concurrency the verdict names the winner on TPOT (lower is better) and on output throughput
(higher is better) among the variants that did not fail the accuracy gate, by how much, and its
accept length. With SLOs (``max_ttft_ms``, ``max_tpot_ms`` at a percentile) a variant qualifies at
a level only when its median-of-repeats figure at that percentile meets them. Overall: with SLOs,
the variant that meets them at the highest concurrency (then the higher throughput there);
without, the variant that wins TPOT measurably at the most levels (then the better geometric-mean
TPOT ratio); the baseline when no variant is measurably faster.
"""
from __future__ import annotations

import math
from statistics import median
from typing import Literal

from pydantic import BaseModel, Field

from tools.measure.accuracy import GateResult
from tools.measure.results import BenchRecord

NOISY = 0.10
BASELINE = "baseline"
Percentile = Literal["p50", "p90", "p95", "p99"]


class Spread(BaseModel):
    median: float
    low: float
    high: float
    n: int

    @property
    def relative(self) -> float:
        return (self.high - self.low) / self.median if self.median else 0.0


class PointStats(BaseModel):
    variant: str
    concurrency: int
    repeats: int
    metrics: dict[str, Spread]
    accept_length: float | None = None
    noisy: list[str] = Field(default_factory=list, description="Metrics whose repeats spread more than NOISY")


class Ratio(BaseModel):
    value: float
    low: float
    high: float

    def text(self) -> str:
        return f"{self.value:.2f}× ({self.low:.2f}–{self.high:.2f})"


class Slo(BaseModel):
    max_ttft_ms: float | None = Field(None, gt=0)
    max_tpot_ms: float | None = Field(None, gt=0)
    percentile: Percentile = "p99"

    @property
    def given(self) -> bool:
        return self.max_ttft_ms is not None or self.max_tpot_ms is not None

    def text(self) -> str:
        parts = [f"TTFT {self.percentile} ≤ {self.max_ttft_ms:g} ms" if self.max_ttft_ms else "",
                 f"TPOT {self.percentile} ≤ {self.max_tpot_ms:g} ms" if self.max_tpot_ms else ""]
        return " and ".join(p for p in parts if p)


class LevelVerdict(BaseModel):
    concurrency: int
    tpot_winner: str | None = Field(description="Measurably fastest variant on TPOT; None: no measurable difference")
    tpot_ratio: Ratio | None = None
    throughput_winner: str | None = None
    throughput_ratio: Ratio | None = None
    accept_length: float | None = None
    meets_slo: list[str] = Field(default_factory=list)
    summary: str


class Verdict(BaseModel):
    recommended: str | None = Field(description="Variant to deploy; None when no variant meets the SLOs")
    reason: str
    levels: list[LevelVerdict]
    excluded: dict[str, str] = Field(default_factory=dict, description="Variants never recommended, and why")
    slo: Slo | None = None
    repeats: int = 1


def _metric_key(kind: str, percentile: str) -> str:
    return f"median_{kind}_ms" if percentile == "p50" else f"{percentile}_{kind}_ms"


def point_stats(records: list[BenchRecord]) -> list[PointStats]:
    """Median and spread per (variant, concurrency); a repeat measured twice counts once (the last)."""
    latest: dict[tuple[str, int, int], BenchRecord] = {}
    for r in records:
        if r.concurrency is not None:
            latest[(r.variant, r.concurrency, r.repeat)] = r
    groups: dict[tuple[str, int], list[BenchRecord]] = {}
    for (variant, conc, _rep), r in sorted(latest.items()):
        groups.setdefault((variant, conc), []).append(r)
    out = []
    for (variant, conc), recs in groups.items():
        metrics: dict[str, Spread] = {}
        for name in recs[0].metrics:
            values = [r.metrics.get(name) for r in recs if r.metrics.get(name) is not None]
            if values:
                metrics[name] = Spread(median=median(values), low=min(values), high=max(values), n=len(values))
        accepts = [r.accept_length for r in recs if r.accept_length is not None]
        noisy = [m for m in ("median_tpot_ms", "output_throughput") if m in metrics and metrics[m].n > 1
                 and metrics[m].relative > NOISY]
        out.append(PointStats(variant=variant, concurrency=conc, repeats=len(recs), metrics=metrics,
                              accept_length=median(accepts) if accepts else None, noisy=noisy))
    return out


def ratio(mine: Spread, base: Spread) -> Ratio | None:
    if not (base.median and base.low and base.high):
        return None
    return Ratio(value=mine.median / base.median, low=mine.low / base.high, high=mine.high / base.low)


def _best(stats: dict[str, PointStats], metric: str, lower_better: bool) -> tuple[str | None, Ratio | None]:
    """The best variant on ``metric`` and its ratio to the baseline, if measurably better."""
    have = {v: s.metrics[metric] for v, s in stats.items() if metric in s.metrics}
    if BASELINE not in have or len(have) < 2:
        return None, None
    others = {v: m for v, m in have.items() if v != BASELINE}
    name = (min if lower_better else max)(others, key=lambda v: others[v].median)
    r = ratio(others[name], have[BASELINE])
    if r is None:
        return None, None
    better = r.high < 1 if lower_better else r.low > 1
    return (name if better else None), r


def _meets(s: PointStats, slo: Slo) -> bool:
    for kind, limit in (("ttft", slo.max_ttft_ms), ("tpot", slo.max_tpot_ms)):
        if limit is None:
            continue
        figure = s.metrics.get(_metric_key(kind, slo.percentile))
        if figure is None or figure.median > limit:
            return False
    return True


def _level(conc: int, stats: dict[str, PointStats], slo: Slo | None) -> LevelVerdict:
    tpot, tpot_r = _best(stats, "median_tpot_ms", lower_better=True)
    thr, thr_r = _best(stats, "output_throughput", lower_better=False)
    meets = [v for v, s in stats.items() if slo is not None and slo.given and _meets(s, slo)]
    if tpot is not None:
        summary = f"{tpot} is fastest on TPOT: {tpot_r.text()} of the baseline"  # type: ignore[union-attr]
    elif tpot_r is not None and tpot_r.low > 1:
        summary = f"the baseline is fastest on TPOT (best variant {tpot_r.text()} of it, measurably slower)"
    elif tpot_r is not None:
        summary = f"no measurable difference on TPOT (best variant {tpot_r.text()} of the baseline)"
    else:
        summary = "no comparison (the baseline or every variant is missing at this level)"
    if thr is not None:
        summary += f"; {thr} has the highest throughput: {thr_r.text()}"  # type: ignore[union-attr]
    elif thr_r is not None and thr_r.high < 1:
        summary += f"; the baseline has the highest throughput (best variant {thr_r.text()})"
    elif thr_r is not None:
        summary += "; no measurable difference on throughput"
    accept = stats[tpot].accept_length if tpot else None
    return LevelVerdict(concurrency=conc, tpot_winner=tpot, tpot_ratio=tpot_r, throughput_winner=thr,
                        throughput_ratio=thr_r, accept_length=accept, meets_slo=meets, summary=summary)


def _overall_slo(levels: list[LevelVerdict], stats: list[PointStats], slo: Slo) -> tuple[str | None, str]:
    by_point = {(s.variant, s.concurrency): s for s in stats}
    best: tuple[int, float, str] | None = None
    for lv in levels:
        for v in lv.meets_slo:
            thr = by_point[(v, lv.concurrency)].metrics.get("output_throughput")
            key = (lv.concurrency, thr.median if thr else 0.0, v)
            best = key if best is None or key[:2] > best[:2] else best
    if best is None:
        return None, f"no variant meets {slo.text()} at any concurrency measured"
    conc, thr, name = best
    return name, (f"{name} meets {slo.text()} up to concurrency {conc}, where it delivers {thr:.0f} output tok/s, "
                  "the most of the variants that meet it")


def _overall(levels: list[LevelVerdict]) -> tuple[str, str]:
    wins: dict[str, list[LevelVerdict]] = {}
    for lv in levels:
        if lv.tpot_winner:
            wins.setdefault(lv.tpot_winner, []).append(lv)
    if not wins:
        return BASELINE, "no MTP variant is measurably faster than the baseline at any concurrency (differences are " \
                         "within the spread of the repeats): keep the baseline"

    def score(v: str) -> tuple[int, float]:
        ratios = [lv.tpot_ratio.value for lv in wins[v] if lv.tpot_ratio]
        return len(wins[v]), -sum(math.log(r) for r in ratios) / max(1, len(ratios))

    name = max(wins, key=score)
    where = ", ".join(f"{lv.tpot_ratio.text()} at concurrency {lv.concurrency}" for lv in wins[name] if lv.tpot_ratio)
    return name, f"{name} has the lowest TPOT measurably at {len(wins[name])} of {len(levels)} levels: {where}"


def decide(records: list[BenchRecord], gates: dict[str, GateResult], slo: Slo | None = None) -> Verdict:
    stats = point_stats(records)
    excluded = {v: g.reason for v, g in gates.items() if g.passed is False}
    eligible = [s for s in stats if s.variant not in excluded]
    levels = []
    for conc in sorted({s.concurrency for s in eligible}):
        levels.append(_level(conc, {s.variant: s for s in eligible if s.concurrency == conc}, slo))
    if slo is not None and slo.given:
        recommended, reason = _overall_slo(levels, eligible, slo)
    else:
        recommended, reason = _overall(levels) if levels else (None, "nothing was measured")
    if excluded:
        reason += "; excluded by the accuracy gate: " + "; ".join(f"{v}: {why}" for v, why in excluded.items())
    return Verdict(recommended=recommended, reason=reason, levels=levels, excluded=excluded, slo=slo,
                   repeats=max((s.repeats for s in stats), default=1))
