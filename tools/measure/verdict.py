"""The decision: which variant to deploy, per concurrency and overall, from repeated measurements.

A point's figure is the median of its repeats and its spread their range; a ratio to the baseline
carries both spreads (``[low_v / high_b, high_v / low_b]``), and a range holding 1, or one sample,
is never called a measurable difference. A point spread by more than ``NOISY`` is flagged noisy.
Per concurrency the winner is the measurably fastest on TPOT among variants that passed the
accuracy gate (with SLOs, the one meeting them with the most throughput), else the baseline; the
rule across concurrencies is written into the verdict (``rule``; docs/decision.md).
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
    one_sample: bool = Field(False, description="A point had one sample: no spread, so never measurable")

    def text(self) -> str:
        if self.one_sample:
            return f"{self.value:.2f}× (one sample)"
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
    winner: str | None = Field(None, description="The variant this level picks (the baseline when none is measurably "
                                                 "better); None: no comparison, or none meets the SLO")
    why: str = Field("", description="Why it wins here, in words")
    summary: str


class Verdict(BaseModel):
    recommended: str | None = Field(description="Variant to deploy; None when no variant meets the SLOs")
    reason: str
    levels: list[LevelVerdict]
    excluded: dict[str, str] = Field(default_factory=dict, description="Variants never recommended, and why")
    slo: Slo | None = None
    repeats: int = 1
    rule: str = Field("", description="The rule that picked the deployed setting across concurrencies")
    target_concurrency: int | None = Field(None, description="--target-concurrency: the level whose winner is deployed")


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
    return Ratio(value=mine.median / base.median, low=mine.low / base.high, high=mine.high / base.low,
                 one_sample=min(mine.n, base.n) < 2)


def _best(stats: dict[str, PointStats], metric: str, lower_better: bool) -> tuple[str | None, str | None, Ratio | None]:
    """The winner on ``metric`` (measurably better than the baseline, else None), the variant best on it
    whether measurably or not, and that variant's ratio to the baseline."""
    have = {v: s.metrics[metric] for v, s in stats.items() if metric in s.metrics}
    if BASELINE not in have or len(have) < 2:
        return None, None, None
    others = {v: m for v, m in have.items() if v != BASELINE}
    name = (min if lower_better else max)(others, key=lambda v: others[v].median)
    r = ratio(others[name], have[BASELINE])
    if r is None:
        return None, None, None
    better = not r.one_sample and (r.high < 1 if lower_better else r.low > 1)
    return (name if better else None), name, r


def _meets(s: PointStats, slo: Slo) -> bool:
    for kind, limit in (("ttft", slo.max_ttft_ms), ("tpot", slo.max_tpot_ms)):
        if limit is None:
            continue
        figure = s.metrics.get(_metric_key(kind, slo.percentile))
        if figure is None or figure.median > limit:
            return False
    return True


def _tpot_words(tpot: str | None, leader: str | None, r: Ratio | None) -> tuple[str, str]:
    """The level's TPOT finding for its summary, and why the baseline keeps it when no variant wins."""
    if tpot is not None:
        return f"{tpot} is fastest on TPOT: {r.text()} of the baseline", ""  # type: ignore[union-attr]
    if r is None:
        return "no comparison (the baseline or every variant is missing at this level)", ""
    if r.one_sample:
        words = f"one sample: no spread, not called measurable ({leader} {r.text()} of the baseline in it)"
        return words, words
    if r.low > 1:
        return (f"the baseline is fastest on TPOT (best variant {r.text()} of it, measurably slower)",
                f"the baseline is measurably fastest on TPOT (best variant {leader}: {r.text()} of it)")
    return (f"no measurable difference on TPOT (best variant {r.text()} of the baseline)",
            f"no variant is measurably faster on TPOT (best: {leader} at {r.text()}, within the spread)")


def _level(conc: int, stats: dict[str, PointStats], slo: Slo | None) -> LevelVerdict:
    tpot, leader, tpot_r = _best(stats, "median_tpot_ms", lower_better=True)
    thr, _, thr_r = _best(stats, "output_throughput", lower_better=False)
    meets = [v for v, s in stats.items() if slo is not None and slo.given and _meets(s, slo)]
    summary, kept = _tpot_words(tpot, leader, tpot_r)
    if thr is not None:
        summary += f"; {thr} has the highest throughput: {thr_r.text()}"  # type: ignore[union-attr]
    elif thr_r is not None and thr_r.high < 1 and not thr_r.one_sample:
        summary += f"; the baseline has the highest throughput (best variant {thr_r.text()})"
    elif thr_r is not None:
        summary += "; no measurable difference on throughput"
    accept = stats[tpot].accept_length if tpot else None
    if slo is not None and slo.given:
        winner, why = _slo_winner(meets, stats, slo)
    elif tpot is not None:
        winner, why = tpot, f"lowest TPOT, measurably: {tpot_r.text()} of the baseline"  # type: ignore[union-attr]
        why += f", accept length {accept:.2f}" if accept else ""
        why += "; also the highest throughput" if thr == tpot else (f"; {thr} has the highest throughput" if thr else "")
    else:
        winner, why = (BASELINE, kept) if tpot_r is not None else (None, summary)
    return LevelVerdict(concurrency=conc, tpot_winner=tpot, tpot_ratio=tpot_r, throughput_winner=thr,
                        throughput_ratio=thr_r, accept_length=accept, meets_slo=meets, winner=winner, why=why,
                        summary=summary)


def _slo_winner(meets: list[str], stats: dict[str, PointStats], slo: Slo) -> tuple[str | None, str]:
    if not meets:
        return None, f"no variant meets {slo.text()} here"
    throughput = {v: stats[v].metrics["output_throughput"].median if "output_throughput" in stats[v].metrics else 0.0
                  for v in meets}
    name = max(sorted(meets), key=lambda v: throughput[v])
    return name, f"meets {slo.text()} with the most output throughput of those that do ({throughput[name]:.0f} tok/s)"


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


MOST_LEVELS = ("the variant that wins the most concurrency levels on TPOT (measurably) is deployed; a tie goes to "
               "the lower geometric-mean TPOT ratio over the levels won, then to the name that sorts first; "
               "the baseline when no variant wins a level")


def _mean_ratio(levels: list[LevelVerdict]) -> float:
    ratios = [lv.tpot_ratio.value for lv in levels if lv.tpot_ratio]
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else 1.0


def _overall(levels: list[LevelVerdict]) -> tuple[str, str]:
    wins: dict[str, list[LevelVerdict]] = {}
    for lv in levels:
        if lv.tpot_winner:
            wins.setdefault(lv.tpot_winner, []).append(lv)
    if not wins:
        if any(lv.tpot_ratio is not None and lv.tpot_ratio.one_sample for lv in levels):
            return BASELINE, ("one sample per point: no spread, so no difference is called measurable; keep the "
                              "baseline (run with --repeats 3 or more to measure the variants)")
        return BASELINE, "no MTP variant is measurably faster than the baseline at any concurrency (differences are " \
                         "within the spread of the repeats): keep the baseline"
    ranked = sorted(wins, key=lambda v: (-len(wins[v]), _mean_ratio(wins[v]), v))
    name = ranked[0]
    where = ", ".join(f"{lv.tpot_ratio.text()} at concurrency {lv.concurrency}" for lv in wins[name] if lv.tpot_ratio)
    reason = f"{name} has the lowest TPOT measurably at {len(wins[name])} of {len(levels)} levels: {where}"
    tied = [v for v in ranked[1:] if len(wins[v]) == len(wins[name])]
    if tied:
        means = ", ".join(f"{v} {_mean_ratio(wins[v]):.2f}×" for v in [name, *tied])
        reason += (f"; tied on levels won with {', '.join(tied)}, broken by the lower geometric-mean TPOT ratio over "
                   f"the levels each won ({means})")
    return name, reason


def _at_target(levels: list[LevelVerdict], target: int) -> tuple[str | None, str]:
    level = next((lv for lv in levels if lv.concurrency == target), None)
    if level is None:
        return None, f"concurrency {target} (--target-concurrency) was not measured"
    if level.winner is None:
        return None, f"at the target concurrency {target}: {level.why}"
    return level.winner, f"at the target concurrency {target}, {level.winner}: {level.why}"


def decide(records: list[BenchRecord], gates: dict[str, GateResult], slo: Slo | None = None,
           target: int | None = None) -> Verdict:
    stats = point_stats(records)
    excluded = {v: g.reason for v, g in gates.items() if g.passed is False}
    eligible = [s for s in stats if s.variant not in excluded]
    levels = []
    for conc in sorted({s.concurrency for s in eligible}):
        levels.append(_level(conc, {s.variant: s for s in eligible if s.concurrency == conc}, slo))
    if target is not None and levels:
        rule = f"--target-concurrency {target}: the winner at concurrency {target} is deployed"
        recommended, reason = _at_target(levels, target)
    elif slo is not None and slo.given:
        rule = (f"with an SLO ({slo.text()}): the variant that meets it at the highest concurrency is deployed, then "
                "the one with the most output throughput there")
        recommended, reason = _overall_slo(levels, eligible, slo)
    else:
        rule = MOST_LEVELS
        recommended, reason = _overall(levels) if levels else (None, "nothing was measured")
    if excluded:
        reason += "; excluded by the accuracy gate: " + "; ".join(f"{v}: {why}" for v, why in excluded.items())
    return Verdict(recommended=recommended, reason=reason, levels=levels, excluded=excluded, slo=slo,
                   repeats=max((s.repeats for s in stats), default=1), rule=rule, target_concurrency=target)
