"""Benchmark results: parse ``bench_serving`` JSONL robustly, every record with its point's accept length.

Keys differ between SGLang versions, ``request_rate`` may be the bare token ``Infinity`` and a run
can leave a torn line: parsing keeps every good record and says which lines it skipped and why.
The client's ``accept_length`` is cumulative since server start, so a record's ``accept_length`` is
the point's own from the server snapshots (tools/measure/accept_snapshots.py), or None with the
reason in ``accept_note``; the client's figure stays in ``accept_length_cumulative``.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from tools import json_data
from tools.measure.accept_snapshots import SNAPSHOTS_DIR, Snapshot, load_pairs, point_accept_length

# Canonical metric -> keys seen across client versions, first match wins.
METRIC_KEYS: dict[str, tuple[str, ...]] = {
    **{f"{stat}_{kind}_ms": (f"{stat}_{kind}_ms",) for kind in ("ttft", "tpot", "itl")
       for stat in ("mean", "median", "p90", "p95", "p99")},
    **{f"{stat}_e2e_latency_ms": (f"{stat}_e2e_latency_ms", f"{stat}_e2el_ms")
       for stat in ("mean", "median", "p90", "p95", "p99")},
    "output_throughput": ("output_throughput", "output_token_throughput", "output_tokens_per_s"),
    "request_throughput": ("request_throughput",),
    "total_throughput": ("total_throughput", "total_token_throughput"),
}
COMPARED = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "median_itl_ms",
            "p99_itl_ms", "output_throughput", "accept_length")


def _number(value: Any) -> float | None:
    """A finite float, or None (missing, null, text, NaN, +-Infinity)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


class BenchRecord(BaseModel):
    variant: str
    concurrency: int | None = Field(None, description="--max-concurrency of the run")
    tag: str | None = None
    repeat: int = Field(1, description="Which repeat of the point (tag suffix -r<i>; 1 without one)")
    request_rate: float | None = Field(None, description="inf for 'as fast as possible'")
    completed: int | None = None
    metrics: dict[str, float | None] = Field(default_factory=dict)
    accept_length: float | None = Field(None, description="This point's own accept length, when isolated")
    accept_length_cumulative: float | None = Field(None, description="The client's figure: since server start")
    accept_isolated: bool = Field(False, description="accept_length covers this point's requests only")
    accept_method: str = Field("no-snapshots", description="counters, first-point-average, no-speculation, ...")
    accept_note: str = ""
    line: int = Field(0, description="1-based line in the JSONL file")


_TAG = re.compile(r"-c(?P<conc>\d+)(?:-r(?P<repeat>\d+))?$")  # our own tags: <variant>-c<k>[-r<i>]


def _concurrency(raw: dict, tag: str | None) -> int | None:
    value = _number(raw.get("max_concurrency"))
    if value is not None:
        return int(value)
    match = _TAG.search(tag or "")
    return int(match["conc"]) if match else None


def _repeat(tag: str | None) -> int:
    match = _TAG.search(tag or "")
    return int(match["repeat"]) if match and match["repeat"] else 1


def _accept_length(raw: dict) -> float | None:
    value = _number(raw.get("accept_length"))
    if value is not None and value > 0:
        return value
    info = raw.get("server_info")
    if isinstance(info, dict):
        if isinstance(info.get("decode"), list) and info["decode"]:
            info = info["decode"][0]  # PD disaggregation: the decode side speculates
        states = info.get("internal_states") if isinstance(info, dict) else None
        if isinstance(states, list) and states and isinstance(states[0], dict):
            value = _number(states[0].get("avg_spec_accept_length"))
            if value is not None and value > 0:
                return value
    return None


def _rate(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    return _number(value)


def record_from_dict(raw: dict, variant: str, line: int = 0) -> BenchRecord:
    tag = raw.get("tag") if isinstance(raw.get("tag"), str) else None
    metrics: dict[str, float | None] = {}
    for name, keys in METRIC_KEYS.items():
        metrics[name] = next((v for v in (_number(raw.get(k)) for k in keys) if v is not None), None)
    completed = _number(raw.get("completed"))
    return BenchRecord(variant=variant, concurrency=_concurrency(raw, tag), tag=tag, repeat=_repeat(tag),
                       request_rate=_rate(raw.get("request_rate")),
                       completed=int(completed) if completed is not None else None,
                       metrics=metrics, accept_length_cumulative=_accept_length(raw), line=line)


def attach_accept_length(record: BenchRecord, pair: tuple[Snapshot | None, Snapshot] | None) -> None:
    """Set the record's per-point accept length from its snapshot pair (or say why there is none)."""
    point = point_accept_length(*(pair or (None, None)))
    if point.method == "no-snapshots" and record.accept_length_cumulative is None:
        point.isolated, point.method, point.note = True, "no-speculation", "no accept length reported"
    record.accept_length, record.accept_isolated = point.value, point.isolated
    record.accept_method, record.accept_note = point.method, point.note


class ParsedResults(BaseModel):
    records: list[BenchRecord] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list, description="Skipped lines and why")


def parse_jsonl(path: Path | str, variant: str | None = None) -> ParsedResults:
    """Every good record of a bench_serving ``--output-file``; bad lines become problems."""
    path = Path(path)
    variant = variant or path.stem
    out = ParsedResults()
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        out.problems.append(f"{path}: no such file (the bench client wrote no result)")
        return out
    for number, raw_line in enumerate(text.splitlines(), start=1):
        if not raw_line.strip():
            continue
        try:
            raw = json_data.loads(raw_line)  # json accepts Infinity/NaN tokens, as Python's writer emits them
        except json.JSONDecodeError as err:
            out.problems.append(f"{path.name}:{number}: not JSON ({err.msg}); line skipped")
            continue
        if not isinstance(raw, dict):
            out.problems.append(f"{path.name}:{number}: not a JSON object; line skipped")
            continue
        out.records.append(record_from_dict(raw, variant, number))
    pairs, snapshot_problems = load_pairs(path.parent / SNAPSHOTS_DIR / path.name)
    out.problems += snapshot_problems
    for record in out.records:
        attach_accept_length(record, pairs.get(record.tag or f"{variant}-c{record.concurrency}"))
    if not out.records and not out.problems:
        out.problems.append(f"{path.name}: empty (no benchmark finished)")
    return out
