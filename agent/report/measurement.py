"""The measurement's sections: verdict, every metric per point (median of repeats, spread, noisy
points flagged), the comparison with the baseline, the accuracy gate; and results.csv / results.json."""
from __future__ import annotations

import csv
import io
import json

from agent.report.blocks import Items, Para, Section
from agent.report.table import Table
from tools.measure.accept_floors import AcceptCheck
from tools.measure.accuracy import AccuracyResult, GateResult
from tools.measure.results import BenchRecord
from tools.measure.verdict import BASELINE, NOISY, PointStats, Spread, Verdict, ratio

# Column headers name the unit: milliseconds, tokens or requests per second, tokens per verify step.
NAMES = {"median_ttft_ms": "TTFT p50", "p99_ttft_ms": "TTFT p99", "median_tpot_ms": "TPOT p50",
         "p99_tpot_ms": "TPOT p99", "median_itl_ms": "ITL p50", "p99_itl_ms": "ITL p99",
         "output_throughput": "output", "accept_length": "accept length"}
UNITS = {"output_throughput": "tok/s", "total_throughput": "tok/s", "request_throughput": "req/s",
         "accept_length": "tok/step"}
LABELS = {m: f"{name} ({UNITS.get(m, 'ms')})" for m, name in NAMES.items()}
RATIO_METRICS = ("median_ttft_ms", "median_tpot_ms", "median_itl_ms", "output_throughput")
TABLE_METRICS = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "median_itl_ms", "p99_itl_ms",
                 "output_throughput")
ALL_METRICS = [f"{s}_{k}_ms" for k in ("ttft", "tpot", "itl") for s in ("median", "p90", "p95", "p99")] + \
              [f"{s}_e2e_latency_ms" for s in ("median", "p90", "p95", "p99")] + \
              ["request_throughput", "output_throughput", "total_throughput"]
NOT_ISOLATED = "†"


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _short(metric: str) -> str:
    """``p99_e2e_latency_ms`` -> ``E2E p99 (ms)``; ``output_throughput`` -> ``output (tok/s)``."""
    if metric.endswith("_throughput"):
        kind = metric.removesuffix("_throughput")
        return f"{'requests' if kind == 'request' else kind} ({UNITS[metric]})"
    stat, name = metric.replace("_latency", "").removesuffix("_ms").replace("median", "p50").split("_", 1)
    return f"{name.upper()} {stat} (ms)"


def _spread(spread: Spread | None, digits: int = 2) -> str:
    if spread is None:
        return "-"
    ranged = spread.n > 1 and spread.high > spread.low
    return f"{spread.median:.{digits}f}" + (f" ({spread.low:.{digits}f}–{spread.high:.{digits}f})" if ranged else "")


def _head(verdict: Verdict, labels: dict[str, str]) -> str:
    rec = verdict.recommended
    setting = f" ({labels[rec]})" if rec and labels.get(rec) else ""
    head = f"{verdict.headline} — " if verdict.headline and rec != BASELINE else ""  # a variant: its ratio per level
    return f"Deploy {rec}{setting}: {head}{verdict.reason}." if rec else f"No recommendation: {verdict.reason}."


def verdict_section(verdict: Verdict | None, labels: dict[str, str], planned: bool) -> Section:
    if verdict is None:
        text = ("Not measured yet: the benchmark was planned on a machine without GPUs; run it on the GPU host "
                "(see Steps) for a verdict." if planned else "No verdict: no benchmark point was measured.")
        return Section("Verdict", [Para(text)], id="verdict")
    deployed = verdict.recommended if verdict.recommended not in (None, BASELINE) else None
    table = Table(["concurrency", "winner", "why", "best variant", "best TPOT vs baseline", "ceiling (1/accept)",
                   *([f"{deployed} TPOT vs baseline"] if deployed else []), "throughput winner",
                   "throughput vs baseline", LABELS["accept_length"], "meets SLO"], id="verdict-table")
    for lv in verdict.levels:
        # a verdict recorded before levels named their winner: the TPOT winner and the summary
        winner = (lv.winner or "none") if lv.why else (lv.tpot_winner or "no measurable difference")
        mine = [(lv.deployed_ratio.text() + (" REGRESSION" if lv.regression else "")) if lv.deployed_ratio
                else "-"] if deployed else []
        table.add(lv.concurrency, winner, lv.why or lv.summary, lv.best or "-",
                  lv.tpot_ratio.text() if lv.tpot_ratio else "-", _fmt(lv.tpot_ceiling), *mine,
                  lv.throughput_winner or "no measurable difference",
                  lv.throughput_ratio.text() if lv.throughput_ratio else "-", _fmt(lv.accept_length),
                  ", ".join(lv.meets_slo) if verdict.slo and verdict.slo.given else "(no SLO)")
    notes = [f"{verdict.repeats} repeat(s) per point on the same server; ratios are medians with the range of the "
             "repeats in brackets; a range that holds 1.00 is no measurable difference. The ceiling is 1 / accept "
             "length: the TPOT ratio the drafter's accept length would give if drafting and verifying were free."]
    if verdict.repeats < 2:
        notes.append("One sample per point: no spread, so no difference is called measurable (--repeats 3 measures).")
    if verdict.slo and verdict.slo.given:
        notes.append(f"SLO: {verdict.slo.text()} (median of the repeats at that percentile).")
    notes += [f"{v} is never recommended: {why}" for v, why in verdict.excluded.items()]
    notes += [f"Accept length: {c.text}" for c in verdict.accept_checks if c.status == "below-floor"]
    alarms = [Para(f"WARNING: {c}", css="callout") for c in verdict.callouts]
    rule = [Para(f"How the deployed setting is chosen across concurrencies: {verdict.rule}.")] if verdict.rule else []
    gate = [Para(verdict.accuracy)] if verdict.accuracy else []
    return Section("Verdict", [Para(_head(verdict, labels)), *alarms, *gate, *rule, table, Items(notes)], id="verdict")


def metrics_section(stats: list[PointStats], labels: dict[str, str]) -> Section:
    """Every metric SGLang's client writes, per point: the median of the repeats (range when repeated)."""
    table = Table(["variant", "setting", "concurrency", "repeats", *[_short(m) for m in ALL_METRICS],
                   LABELS["accept_length"]], id="metrics")
    noisy = []
    for s in stats:
        cells = []
        for m in ALL_METRICS:
            spread = s.metrics.get(m)
            cells.append("-" if spread is None else _fmt(spread.median) + (
                f" ({spread.low:.2f}–{spread.high:.2f})" if spread.n > 1 and spread.high > spread.low else ""))
        table.add(s.variant, labels.get(s.variant, ""), s.concurrency, s.repeats, *cells, _fmt(s.accept_length))
        noisy += [f"NOISY: {s.variant} at concurrency {s.concurrency}: {m} spreads "
                  f"{s.metrics[m].relative * 100:.0f}% across {s.repeats} repeats (more than {NOISY * 100:.0f}%); "
                  "treat its figures with care or re-run with more --repeats" for m in s.noisy]
    blocks = [table] + ([Items(noisy)] if noisy else [])
    return Section("Every metric per point", blocks, id="all-metrics")


def _accept_cell(s: PointStats, loose: BenchRecord | None) -> str:
    if loose is None:
        return _fmt(s.accept_length)
    cum = loose.accept_length_cumulative
    return f"n/a{NOT_ISOLATED}" + (f" (cum. {cum:.2f})" if cum is not None else "")


def comparison_section(stats: list[PointStats], records: list[BenchRecord], checks: list[AcceptCheck]) -> Section:
    """The one comparison table: per point the medians of its repeats with their range, and the ratios to
    the baseline the verdict uses (tools/measure/verdict.py ``ratio``), beside each point's ceiling."""
    head = ["variant", "concurrency", "repeats", *[LABELS[m] for m in TABLE_METRICS], LABELS["accept_length"],
            "TPOT ceiling (1/accept, × baseline)", *[f"{NAMES[m]} (× baseline)" for m in RATIO_METRICS]]
    table = Table(head, id="comparison")
    base = {s.concurrency: s for s in stats if s.variant == BASELINE}
    loose = {(r.variant, r.concurrency): r for r in records if not r.accept_isolated}
    for s in sorted(stats, key=lambda s: (s.variant != BASELINE, s.variant, s.concurrency)):
        ratios = []
        for m in RATIO_METRICS:
            mine, ref = s.metrics.get(m), base[s.concurrency].metrics.get(m) if s.concurrency in base else None
            r = ratio(mine, ref) if mine is not None and ref is not None and s.variant != BASELINE else None
            ratios.append(r.text() if r else "-")
        table.add(s.variant, s.concurrency, s.repeats, *[_spread(s.metrics.get(m)) for m in TABLE_METRICS],
                  _accept_cell(s, loose.get((s.variant, s.concurrency))), _fmt(s.tpot_ceiling), *ratios)
    note = ("Medians of the repeats with their range, the same figures the verdict uses; ratios are variant / "
            "baseline with the range both spreads allow ('-': no baseline there). Accept length: the point's own "
            "generated tokens / verify calls (server counters before and after it, every request on every "
            "data-parallel rank); ceiling: 1 / accept length, the TPOT ratio if drafting and verifying were free. "
            + " ".join(f"Accept length: {c.text}." for c in checks))
    blocks = [table, Para(note.strip())]
    blocks += [Para(f"{NOT_ISOLATED} {r.variant} at concurrency {r.concurrency}: accept length not isolated: "
                    f"{r.accept_note}", css="not-isolated") for r in loose.values()]
    return Section("Comparison", blocks, id="comparison-section")


def accuracy_section(results: dict[str, AccuracyResult], gates: dict[str, GateResult], skip: str | None) -> Section:
    if skip:
        return Section("Accuracy (GSM8K)", [Para(f"Accuracy gate skipped: {skip}. No variant was checked; the "
                                                 "verdict does not vouch for accuracy.")], id="accuracy")
    if not results:
        return Section("Accuracy (GSM8K)", [Para("Not run yet: each variant's server gets SGLang's GSM8K few-shot "
                                                 "check after its benchmark points.")], id="accuracy")
    table = Table(["variant", "accuracy (share correct)", "invalid (share)", "questions", "gate", "why"],
                  id="accuracy-table")
    for name in sorted(set(results) | set(gates), key=lambda v: (v != "baseline", v)):
        res, g = results.get(name), gates.get(name)
        verdict = "-" if g is None else {True: "pass", False: "FAIL", None: "not checked"}[g.passed]
        table.add(name, _fmt(res.accuracy if res else None, 3), _fmt(res.invalid if res else None, 3),
                  res.questions if res else "-", verdict, g.reason if g else "no result")
    note = ("SGLang's own `python -m sglang.test.few_shot_gsm8k` against each variant's server after its benchmark "
            "points; a variant below the baseline's tolerance fails and is never recommended.")
    return Section("Accuracy (GSM8K)", [table, Para(note)], id="accuracy")


# results.csv keeps 4 significant digits, a resolution of 0.1 % of the value: finer than the spread between
# repeats of a serving benchmark point (around a percent; above NOISY it is flagged), so no digit it drops
# was a measured one. results.json keeps the client's own numbers.
CSV_DIGITS = 4


def _csv_number(value: float | None) -> float | int | str:
    if value is None:
        return ""
    rounded = float(f"{value:.{CSV_DIGITS}g}")
    return int(rounded) if rounded.is_integer() else rounded


def results_files(stats: list[PointStats], labels: dict[str, str], records: list[BenchRecord]) -> tuple[str, str]:
    """results.csv (one row per point, medians and ranges, rounded) and results.json (the points, and every
    run, as measured)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["variant", "setting", "concurrency", "repeats", "accept_length",
                     *[f"{m}{suffix}" for m in ALL_METRICS for suffix in ("", "_low", "_high")]])
    for s in stats:
        row = [s.variant, labels.get(s.variant, ""), s.concurrency, s.repeats, _csv_number(s.accept_length)]
        for m in ALL_METRICS:
            spread = s.metrics.get(m)
            row += [_csv_number(v) for v in (spread.median, spread.low, spread.high)] if spread else ["", "", ""]
        writer.writerow(row)
    data = {"points": [{"setting": labels.get(s.variant, ""), **s.model_dump(mode="json")} for s in stats],
            "runs": [r.model_dump(mode="json") for r in records]}
    return out.getvalue(), json.dumps(data, indent=2, default=str) + "\n"
