"""Across concurrencies: which setting is deployed (``--target-concurrency``, an SLO, or the levels
won), its TPOT ratio at every level, the regressions it carries, and the headline that says all of
it in one line. A level without a measured baseline gives no verdict; with no level compared there
is no recommendation (docs/decision.md)."""
from __future__ import annotations

import math

from tools.measure.accept_floors import AcceptCheck
from tools.measure.verdict_models import BASELINE, LevelVerdict, PointStats, Ratio, Slo

MOST_LEVELS = ("the variant that wins the most concurrency levels on TPOT (measurably) is deployed; a tie goes to "
               "the lower geometric-mean TPOT ratio over the levels won, then to the name that sorts first; "
               "the baseline when no variant wins a level")


def overall_slo(levels: list[LevelVerdict], stats: list[PointStats], slo: Slo) -> tuple[str | None, str]:
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


def _mean_ratio(levels: list[LevelVerdict]) -> float:
    ratios = [lv.tpot_ratio.value for lv in levels if lv.tpot_ratio]
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else 1.0


def most_levels(levels: list[LevelVerdict]) -> tuple[str, str]:
    wins: dict[str, list[LevelVerdict]] = {}
    for lv in levels:
        if lv.tpot_winner:
            wins.setdefault(lv.tpot_winner, []).append(lv)
    if not wins:
        if any(lv.tpot_ratio is not None and lv.tpot_ratio.one_sample for lv in levels):
            return BASELINE, ("one sample per point: no spread, so no difference is called measurable; keep the "
                              "baseline (run with --repeats 3 or more to measure the variants)")
        return BASELINE, ("no MTP variant is measurably faster than the baseline at any concurrency (differences "
                          "are within the spread of the repeats): keep the baseline")
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


def at_target(levels: list[LevelVerdict], target: int) -> tuple[str | None, str]:
    level = next((lv for lv in levels if lv.concurrency == target), None)
    if level is None:
        return None, f"concurrency {target} (--target-concurrency) was not measured"
    if level.winner is None:
        return None, f"at the target concurrency {target}: {level.why}"
    return level.winner, f"at the target concurrency {target}, {level.winner}: {level.why}"


def mark_deployed(levels: list[LevelVerdict], stats: list[PointStats], deployed: str | None,
                  ratio_of) -> None:
    """Each level's TPOT ratio of the deployed variant, and whether it is measurably slower there."""
    by_point = {(s.variant, s.concurrency): s for s in stats}
    for lv in levels:
        mine, base = by_point.get((deployed or "", lv.concurrency)), by_point.get((BASELINE, lv.concurrency))
        if deployed in (None, BASELINE) or mine is None or base is None or not lv.baseline_measured:
            continue
        if "median_tpot_ms" in mine.metrics and "median_tpot_ms" in base.metrics:
            lv.deployed_ratio = ratio_of(mine.metrics["median_tpot_ms"], base.metrics["median_tpot_ms"])
            r = lv.deployed_ratio
            lv.regression = bool(r is not None and not r.one_sample and r.low > 1)


def _levels_text(concs: list[int], all_concs: list[int]) -> str:
    """``c ≥ 8`` when the levels are the top of those measured, else ``c8, c16``."""
    if len(concs) > 1 and concs == all_concs[len(all_concs) - len(concs):]:
        return f"c ≥ {concs[0]}"
    return ", ".join(f"c{c}" for c in concs)


def _ratio_words(r: Ratio, first: bool) -> str:
    words = f"{r.value:.2f}×" + (" TPOT" if first else "")
    return words + (" (measurably slower)" if not r.one_sample and r.low > 1 else "")


def headline(deployed: str | None, levels: list[LevelVerdict]) -> str:
    """The deployed setting and its TPOT ratio at every level, and where another choice is better."""
    concs = [lv.concurrency for lv in levels]
    missing = [lv.concurrency for lv in levels if not lv.baseline_measured]
    tail = f"; no verdict at {', '.join(f'c{c}' for c in missing)} (baseline not measured)" if missing else ""
    if deployed is None:
        return "no recommendation" + tail
    if deployed == BASELINE:
        bests = [f"{lv.best} {lv.tpot_ratio.value:.2f}× at c{lv.concurrency}" for lv in levels
                 if lv.best and lv.tpot_ratio is not None]
        return "keep the baseline" + (f" (best variant per level: {', '.join(bests)})" if bests else "") + tail
    parts = [f"{_ratio_words(lv.deployed_ratio, not i)} at c{lv.concurrency}"
             for i, lv in enumerate(lv for lv in levels if lv.deployed_ratio is not None)]
    text = f"{deployed}: {', '.join(parts)}" if parts else deployed
    others: dict[str, list[int]] = {}
    for lv in levels:
        if lv.baseline_measured and lv.winner and lv.winner != deployed:
            others.setdefault(lv.winner, []).append(lv.concurrency)
    advice = [f"keep the baseline if you serve at {_levels_text(c, concs)}" if w == BASELINE
              else f"{w} is faster at {_levels_text(c, concs)}" for w, c in others.items()]
    return text + (": " + "; ".join(advice) if advice else "") + tail


def disagreement(deployed: str | None, levels: list[LevelVerdict]) -> bool:
    """The compared levels pick more than one setting (or the deployed one regresses somewhere)."""
    picks = {lv.winner for lv in levels if lv.baseline_measured and lv.winner}
    return deployed is not None and (len(picks) > 1 or any(lv.regression for lv in levels))


def callouts(deployed: str | None, levels: list[LevelVerdict], checks: list[AcceptCheck]) -> list[str]:
    """Regressions of the deployed setting and collapsed drafters, one line each."""
    out = [f"regression at concurrency {lv.concurrency}: {deployed} is measurably slower than the baseline "
           f"({lv.deployed_ratio.text()} TPOT)" for lv in levels if lv.regression and lv.deployed_ratio]
    return out + [c.text for c in checks if c.status == "collapsed"]
