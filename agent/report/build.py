"""The campaign report, rebuilt from the run folder alone: ``report.md``, ``report.html``, plots.

Reads ``plan.md``, ``steps/<kind>.json`` (step outcomes), ``bench/<variant>.jsonl`` and
``bench/<variant>.failures.jsonl``. Other parts of the product add sections (a timeline, tuning
proof, ...) as ``(title, markdown, html)`` triples. ``report.html`` is self-contained: the plots
are embedded as data URIs, so the file can be mailed or opened from anywhere.
"""
from __future__ import annotations

import base64
import html
import json
import os
from pathlib import Path
from typing import Iterable

from agent.report.plots import write_plots
from tools.measure.results import COMPARED, ComparisonRow, compare, parse_jsonl

Section = tuple[str, str, str]  # (title, markdown, html)
LABELS = {"median_ttft_ms": "TTFT p50 ms", "p99_ttft_ms": "TTFT p99 ms", "median_tpot_ms": "TPOT p50 ms",
          "p99_tpot_ms": "TPOT p99 ms", "median_itl_ms": "ITL p50 ms", "p99_itl_ms": "ITL p99 ms",
          "output_throughput": "out tok/s", "accept_length": "accept len"}
RATIO_METRICS = ("median_ttft_ms", "median_tpot_ms", "median_itl_ms", "output_throughput")
MAX_PLAN_CHARS = 20000


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def load_results(run_dir: Path) -> tuple[list[ComparisonRow], list[str], list[dict]]:
    """Comparison rows, parse problems, and failures of points that never produced a result."""
    bench = run_dir / "bench"
    records, problems, failures = [], [], []
    for path in sorted(bench.glob("*.jsonl")):
        if path.name.endswith(".failures.jsonl"):
            continue  # snapshots/<variant>.jsonl is in a subfolder: the glob never sees it
        parsed = parse_jsonl(path)
        records += parsed.records
        problems += parsed.problems
    measured = {(r.variant, r.concurrency) for r in records}
    latest: dict[tuple, dict] = {}
    for path in sorted(bench.glob("*.failures.jsonl")):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                problems.append(f"{path.name}:{number}: not JSON; line skipped")
                continue
            key = (item.get("variant"), item.get("concurrency"))
            if key not in measured:  # a later retry that succeeded wins over the failure
                latest[key] = item
    failures = list(latest.values())
    return compare(records), problems, failures


NOT_ISOLATED = "†"


def _cells(row: ComparisonRow) -> list[str]:
    """Metric and ratio cells; an accept length that is not this point's own is shown as such."""
    cells = []
    for m in COMPARED:
        if m == "accept_length" and not row.accept_isolated:
            cum = row.accept_length_cumulative
            cells.append(f"n/a{NOT_ISOLATED}" + (f" (cum. {cum:.2f})" if cum is not None else ""))
        else:
            cells.append(_fmt(row.values.get(m)))
    return cells + [_fmt(row.ratios.get(m), 3) for m in RATIO_METRICS]


def _accept_notes(rows: list[ComparisonRow]) -> list[str]:
    return [f"{NOT_ISOLATED} {r.variant} at concurrency {r.concurrency}: accept length not isolated: {r.accept_note}"
            for r in rows if not r.accept_isolated]


def _table_md(rows: list[ComparisonRow]) -> str:
    head = ["variant", "conc"] + [LABELS[m] for m in COMPARED] + [f"{LABELS[m]} ×base" for m in RATIO_METRICS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row.variant, str(row.concurrency if row.concurrency is not None else "?")] + _cells(row)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _table_html(rows: list[ComparisonRow]) -> str:
    head = ["variant", "conc"] + [LABELS[m] for m in COMPARED] + [f"{LABELS[m]} ×base" for m in RATIO_METRICS]
    out = ['<table id="comparison"><thead><tr>' + "".join(f"<th>{html.escape(h)}</th>" for h in head)
           + "</tr></thead><tbody>"]
    for row in rows:
        cells = [html.escape(row.variant), str(row.concurrency if row.concurrency is not None else "?")]
        cells += [html.escape(c) for c in _cells(row)]
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return "\n".join(out) + "</tbody></table>"


def _outcomes(run_dir: Path) -> list[dict]:
    found = []
    for path in sorted((run_dir / "steps").glob("*.json")):
        try:
            found.append(json.loads(path.read_text()))
        except json.JSONDecodeError:
            found.append({"kind": path.stem, "status": "?", "summary": f"{path.name} is not JSON"})
    return found


def _plan_text(run_dir: Path) -> str:
    path = run_dir / "plan.md"
    if not path.exists():
        return ""
    text = path.read_text(errors="replace")
    if len(text) > MAX_PLAN_CHARS:
        text = text[:MAX_PLAN_CHARS] + f"\n\n[cut: {len(text) - MAX_PLAN_CHARS} more characters; limit {MAX_PLAN_CHARS}]"
    return text


def _sections(run_dir: Path, rows, problems, failures, plots: list[Path]) -> list[Section]:
    sections: list[Section] = []
    plan = _plan_text(run_dir)
    if plan:
        sections.append(("Plan", plan, f"<pre>{html.escape(plan)}</pre>"))
    outcomes = _outcomes(run_dir)
    if outcomes:
        md = "\n".join(f"- **{o.get('kind')}**: {o.get('status')} — {o.get('summary', '')}" for o in outcomes)
        li = "".join(f"<li><b>{html.escape(str(o.get('kind')))}</b>: {html.escape(str(o.get('status')))} — "
                     f"{html.escape(str(o.get('summary', '')))}</li>" for o in outcomes)
        sections.append(("Steps", md, f"<ul>{li}</ul>"))
    if rows:
        note = ("Ratios are variant / baseline at the same concurrency: below 1 is better for TTFT, TPOT "
                "and ITL, above 1 is better for throughput. Accept length is each point's own: generated "
                "tokens / speculative verify calls between server snapshots taken before and after the "
                "point (SGLang's `avg_spec_accept_length` is cumulative since server start).")
        notes = _accept_notes(rows)
        sections.append(("Comparison", _table_md(rows) + "\n\n" + note + "".join(f"\n\n{n}" for n in notes),
                         _table_html(rows) + f"<p>{html.escape(note)}</p>"
                         + "".join(f'<p class="not-isolated">{html.escape(n)}</p>' for n in notes)))
    else:
        msg = "No benchmark results in bench/ (the benchmark was planned, not run, or every point failed)."
        sections.append(("Comparison", msg, f"<p>{html.escape(msg)}</p>"))
    if plots:
        md = "\n\n".join(f"![{p.stem}](plots/{p.name})" for p in plots)
        imgs = "".join(f'<figure><img alt="{p.stem}" src="data:image/png;base64,'
                       f'{base64.b64encode(p.read_bytes()).decode()}"><figcaption>{p.stem}</figcaption></figure>'
                       for p in plots)
        sections.append(("Plots", md, imgs))
    if failures or problems:
        items = [f"{f.get('variant')} at concurrency {f.get('concurrency')}: "
                 f"{str(f.get('reason', '')).splitlines()[0] if f.get('reason') else '?'} (log: {f.get('log', '')})"
                 for f in failures] + problems
        sections.append(("Failed points and skipped lines", "\n".join(f"- {i}" for i in items),
                         "<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>"))
    return sections


_CSS = ("body{font-family:sans-serif;margin:2em;max-width:1200px;color:#222}"
        "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #999;padding:4px 6px;text-align:right}"
        "th{background:#e8eef8}td:first-child{text-align:left}figure{display:inline-block;margin:8px}"
        "pre{background:#f4f4f4;padding:8px;white-space:pre-wrap}")


def _write_atomically(path: Path, text: str) -> None:
    """A report being rebuilt is never half-written: readers see the old one or the new one."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def build_report(run_dir: Path | str, extra_sections: Iterable[Section] = ()) -> list[Path]:
    """Write report.md, report.html and plots/*.png into the run folder; return the paths."""
    run_dir = Path(run_dir)
    rows, problems, failures = load_results(run_dir)
    plots = write_plots(rows, run_dir / "plots") if rows else []
    sections = _sections(run_dir, rows, problems, failures, plots) + list(extra_sections)
    title = f"dsv4-agent report — {run_dir.name}"
    md = f"# {title}\n\n" + "\n\n".join(f"## {t}\n\n{m}" for t, m, _h in sections) + "\n"
    body = "\n".join(f"<section><h2>{html.escape(t)}</h2>\n{h}</section>" for t, _m, h in sections)
    page = (f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n")
    _write_atomically(run_dir / "report.md", md)
    _write_atomically(run_dir / "report.html", page)
    return [run_dir / "report.md", run_dir / "report.html", *plots]
