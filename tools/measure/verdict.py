"""The decision: which variant to deploy, per concurrency and overall, from repeated measurements.

A point's figure is the median of its repeats and its spread their range; a ratio to the baseline
carries both spreads (``[low_v / high_b, high_v / low_b]``), and a range holding 1, or one sample,
is never called a measurable difference. A point spread by more than ``NOISY`` is flagged noisy.
Per concurrency the winner is the measurably fastest on TPOT among variants that passed the
accuracy gate (with SLOs, the one meeting them with the most throughput), else the baseline; the
rule across concurrencies is written into the verdict (``rule``; docs/decision.md).
"""
from __future__ import annotations

from statistics import median

from tools.measure.accept_floors import AcceptCheck, Floor, check_accept
from tools.measure.accuracy import GateResult
from tools.measure.results import BenchRecord
from tools.measure.verdict_models import BASELINE, LevelVerdict, PointStats, Ratio, Slo, Spread, Verdict
from tools.measure.verdict_overall import (
    MOST_LEVELS, at_target, callouts, disagreement, headline, mark_deployed, most_levels, overall_slo,
)

__all__ = ["BASELINE", "NOISY", "LevelVerdict", "PointStats", "Ratio", "Slo", "Spread", "Verdict", "decide",
           "point_stats", "ratio"]
NOISY = 0.10
RESUME = "dsv4-agent resume RUN"


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
        spread = Spread(median=median(accepts), low=min(accepts), high=max(accepts), n=len(accepts)) if accepts else None
        accept = spread.median if spread else None
        out.append(PointStats(variant=variant, concurrency=conc, repeats=len(recs), metrics=metrics, accept_length=accept,
                              accept_spread=spread, tpot_ceiling=1 / accept if accept else None, noisy=noisy))
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


def _level(conc: int, stats: dict[str, PointStats], slo: Slo | None, resume: str) -> LevelVerdict:
    if BASELINE not in stats:  # never a verdict without the reference every ratio is against
        why = f"no verdict at concurrency {conc}: baseline not measured — `{resume}`"
        return LevelVerdict(concurrency=conc, tpot_winner=None, why=why, summary=why, baseline_measured=False)
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
                        summary=summary, best=leader, tpot_ceiling=stats[leader].tpot_ceiling if leader else None)


def _slo_winner(meets: list[str], stats: dict[str, PointStats], slo: Slo) -> tuple[str | None, str]:
    if not meets:
        return None, f"no variant meets {slo.text()} here"
    throughput = {v: stats[v].metrics["output_throughput"].median if "output_throughput" in stats[v].metrics else 0.0
                  for v in meets}
    name = max(sorted(meets), key=lambda v: throughput[v])
    return name, f"meets {slo.text()} with the most output throughput of those that do ({throughput[name]:.0f} tok/s)"


Spec = tuple[str | None, int | None]  # (--speculative-algorithm, --speculative-num-steps) of a variant


def accept_checks(stats: list[PointStats], specs: dict[str, Spec], floors: list[Floor]) -> list[AcceptCheck]:
    """Each speculative variant's lowest per-point accept length against SGLang's own test floors."""
    out = []
    for variant, (algorithm, steps) in specs.items():
        if not algorithm:
            continue
        seen = [(s.concurrency, s.accept_length) for s in stats if s.variant == variant and s.accept_length]
        out.append(check_accept(variant, algorithm, steps, min(seen, key=lambda p: p[1]) if seen else None, floors))
    return out


def _pick(levels: list[LevelVerdict], eligible: list[PointStats], slo: Slo | None,
          target: int | None) -> tuple[str | None, str, str]:
    """(deployed variant or None, why, the rule that chose it) over the levels compared with a baseline."""
    compared = [lv for lv in levels if lv.baseline_measured and lv.tpot_ratio is not None]
    if target is not None:
        rule = f"--target-concurrency {target}: the winner at concurrency {target} is deployed"
        return (*at_target(levels, target), rule) if levels else (None, "nothing was measured", rule)
    if slo is not None and slo.given:
        rule = (f"with an SLO ({slo.text()}): the variant that meets it at the highest concurrency is deployed, then "
                "the one with the most output throughput there")
        return (*overall_slo(compared, eligible, slo), rule)
    if not levels:
        return None, "nothing was measured", MOST_LEVELS
    if not compared:
        return None, "no concurrency level has both a measured baseline and a measured variant", MOST_LEVELS
    return (*most_levels(compared), MOST_LEVELS)


def decide(records: list[BenchRecord], gates: dict[str, GateResult], slo: Slo | None = None,
           target: int | None = None, *, resume: str = RESUME, specs: dict[str, Spec] | None = None,
           floors: list[Floor] | None = None, accuracy: str = "") -> Verdict:
    """The verdict; ``resume`` is the command that measures what is missing, ``specs`` each variant's
    speculative setting and ``floors`` SGLang's accept-length floors (tools/measure/accept_floors.py)."""
    stats = point_stats(records)
    excluded = {v: g.reason for v, g in gates.items() if g.passed is False}
    eligible = [s for s in stats if s.variant not in excluded]
    levels = [_level(conc, {s.variant: s for s in eligible if s.concurrency == conc}, slo, resume)
              for conc in sorted({s.concurrency for s in eligible})]
    recommended, reason, rule = _pick(levels, eligible, slo, target)
    mark_deployed(levels, eligible, recommended, ratio)
    line = headline(recommended, levels)
    disagree = target is None and not (slo is not None and slo.given) and disagreement(recommended, levels)
    if disagree:
        reason += ("; the levels disagree and neither --target-concurrency nor an SLO says which level matters: "
                   "pass --target-concurrency N (the concurrency you serve at) to decide")
    if excluded:
        reason += "; excluded by the accuracy gate: " + "; ".join(f"{v}: {why}" for v, why in excluded.items())
    checks = accept_checks(stats, specs or {}, floors or [])
    return Verdict(recommended=recommended, reason=reason, levels=levels,
                   excluded=excluded, slo=slo, repeats=max((s.repeats for s in stats), default=1), rule=rule,
                   target_concurrency=target, headline=line, disagree=disagree, accuracy=accuracy,
                   accept_checks=checks, callouts=callouts(recommended, levels, checks))
