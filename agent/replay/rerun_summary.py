"""What ``replay --rerun`` says first: per measured metric old, new, the change and whether it is
within noise; then whether the recommended flags and the tuned shapes changed. The raw field-by-
field diff (agent/replay/rerun.py) is shown on request only: paths and timings make it long.

Each point's figure and spread are the verdict's (tools/measure/verdict.py ``point_stats``), so the
two cannot disagree. A change is within noise when it is no larger than the tolerance (``--tolerance``,
percent) or than the spread of the point's own repeats in either run ((max - min) / median), whichever
is wider; with one repeat per point only the tolerance applies.
"""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from agent.run.run_files import RunFiles
from tools.measure.decision import bench_records
from tools.measure.results import COMPARED
from tools.measure.verdict import PointStats, Spread, point_stats

DEFAULT_TOLERANCE_PCT = 5.0


class MetricChange(BaseModel):
    point: str = Field(description="<variant> c<concurrency>")
    metric: str
    old: float | None
    new: float | None
    change_pct: float | None = Field(description="(new - old) / old, percent; None when either is missing or old is 0")
    noise_pct: float = Field(description="The band a change must leave to count: tolerance or the repeats' spread")

    @property
    def within_noise(self) -> bool:
        return self.change_pct is not None and abs(self.change_pct) <= self.noise_pct


class RerunSummary(BaseModel):
    tolerance_pct: float
    metrics: list[MetricChange] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list, description="Recommended flag changes, one line each")
    shapes: list[str] = Field(default_factory=list, description="Tuned shapes added or gone")

    def render(self) -> str:
        moved = [m for m in self.metrics if not m.within_noise]
        lines = [f"re-run summary: {len(self.metrics)} metric(s) compared, {len(moved)} outside noise "
                 f"(tolerance ±{self.tolerance_pct:g}% or the repeats' own spread)"]
        if self.metrics:
            lines.append(f"  {'point':<16} {'metric':<18} {'old':>10} {'new':>10} {'change':>9}  verdict")
        for m in self.metrics:
            change = f"{m.change_pct:+.1f}%" if m.change_pct is not None else "n/a"
            verdict = ("within noise" if m.within_noise else
                       "not comparable" if m.change_pct is None else f"CHANGED (noise ±{m.noise_pct:.1f}%)")
            lines.append(f"  {m.point:<16} {m.metric:<18} {_num(m.old):>10} {_num(m.new):>10} {change:>9}  {verdict}")
        lines.append("recommended flags: " + ("; ".join(self.flags) if self.flags else "unchanged"))
        lines.append("tuned shapes: " + ("; ".join(self.shapes) if self.shapes else "unchanged"))
        return "\n".join(lines)


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _points(run: Path) -> dict[tuple[str, int], PointStats]:
    """(variant, concurrency) -> the point's median and spread, as the verdict figures them."""
    records, _problems = bench_records(run / "bench") if (run / "bench").is_dir() else ([], [])
    return {(s.variant, s.concurrency): s for s in point_stats(records)}


def _figure(point: PointStats | None, metric: str) -> Spread | None:
    if point is None:
        return None
    return point.accept_spread if metric == "accept_length" else point.metrics.get(metric)


def _metric_changes(old: Path, new: Path, tolerance_pct: float) -> list[MetricChange]:
    before, after = _points(old), _points(new)
    changes = []
    for key in sorted(set(before) | set(after)):
        for metric in COMPARED:
            a, b = _figure(before.get(key), metric), _figure(after.get(key), metric)
            if a is None and b is None:
                continue
            va, vb = (a.median if a else None), (b.median if b else None)
            change = (vb - va) / abs(va) * 100 if va and vb is not None else None
            spread = max((f.relative * 100 for f in (a, b) if f is not None), default=0.0)
            changes.append(MetricChange(point=f"{key[0]} c{key[1]}", metric=metric, old=va, new=vb, change_pct=change,
                                        noise_pct=max(tolerance_pct, spread)))
    return changes


def _flags(run: Path) -> dict[str, str]:
    answer = RunFiles(run).mtp_answer()
    return dict(answer.recommended.flags) if answer is not None and answer.recommended else {}


def _shapes(run: Path) -> set[str]:
    tuned = RunFiles(run).step_outcome("tune_kernels")
    shapes = (tuned.data.get("shapes") or []) if tuned is not None else []
    return {s if isinstance(s, str) else f"{s.get('n')},{s.get('k')}" for s in shapes}


def summarize(old: Path, new: Path, tolerance_pct: float = DEFAULT_TOLERANCE_PCT) -> RerunSummary:
    a, b = _flags(old), _flags(new)
    flags = [f"{k}: {a.get(k, '(none)')} → {b.get(k, '(none)')}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    sa, sb = _shapes(old), _shapes(new)
    shapes = [f"+{s}" for s in sorted(sb - sa)] + [f"-{s}" for s in sorted(sa - sb)]
    return RerunSummary(tolerance_pct=tolerance_pct, metrics=_metric_changes(Path(old), Path(new), tolerance_pct),
                        flags=flags, shapes=shapes)
