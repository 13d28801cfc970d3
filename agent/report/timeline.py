"""The run as intervals on lanes, and the figures reviewers ask about.

Lanes: one per GPU (a job naming no GPU counts on each), GPU-less clients (bench points, the
accuracy check), the GPU lane's steps, research steps, control and LLM calls. A re-attached job
keeps its first launch's start; a finish recorded twice is drawn once. Times are seconds from the
first event on the wall clock (``t``), which, unlike ``mono``, holds across a resumed run's processes.

- overlap: the share of research time during which GPU work ran (``basis`` says what stood in
  when no job was launched) — did research hide under the GPU?
- GPU idle: the share of GPU-seconds of the run (GPUs × span) with no job on the GPU.
- critical path: graph nodes in order; of nodes side by side, the one that finished last is on it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

Interval = tuple[float, float]
CLIENTS = "clients (no GPU)"  # the lane of jobs that use no GPU: bench clients, the accuracy check


@dataclass
class Bar:
    lane: str
    label: str
    start: float
    end: float
    status: str = ""

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class Timeline:
    span: float                                   # seconds from first to last event
    bars: list[Bar]
    gpus: list[int]
    overlap_pct: float | None                     # research time under GPU work, %
    gpu_idle_pct: float | None                    # GPU-seconds with no job, %
    basis: str                                    # what "GPU work" meant for the overlap
    critical_path: list[tuple[str, float]]        # (node, seconds) in order
    slack: list[tuple[str, float]]                # (node, seconds it waited for the critical one)
    notes: list[str] = field(default_factory=list)

    def lanes(self) -> list[str]:
        order: list[str] = []
        for bar in self.bars:
            if bar.lane not in order:
                order.append(bar.lane)
        return sorted(order, key=_lane_rank)

    def slowest(self, n: int = 5) -> list[Bar]:
        work = [b for b in self.bars if not b.lane.startswith("node")]
        return sorted(work, key=lambda b: b.seconds, reverse=True)[:n]


def _lane_rank(lane: str) -> tuple[int, str]:
    for rank, prefix in enumerate(("GPU ", CLIENTS, "gpu steps", "research", "control", "LLM", "node")):
        if lane.startswith(prefix):
            return rank, lane
    return 9, lane


def union(intervals: list[Interval]) -> list[Interval]:
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def measure(intervals: list[Interval]) -> float:
    return sum(b - a for a, b in union(intervals))


def intersect(a: list[Interval], b: list[Interval]) -> float:
    """Total length of the intersection of two interval sets (each merged first)."""
    total, i, j = 0.0, 0, 0
    a, b = union(a), union(b)
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _gpus_of(event: dict) -> list[int] | None:
    if isinstance(event.get("gpus"), list):
        return [int(g) for g in event["gpus"]]
    if isinstance(event.get("gpu"), int):
        return [event["gpu"]]
    return None


def build_timeline(events: list[dict], known_gpus: list[int] = ()) -> Timeline:
    if not events:
        return Timeline(0.0, [], [], None, None, "no events", [], [], ["the trace has no events"])
    t0 = events[0]["t"]
    end_t = events[-1]["t"] - t0
    bars: list[Bar] = []
    notes: list[str] = []
    open_steps: dict[tuple[str, str], float] = {}
    open_nodes: dict[tuple[str, str], float] = {}
    open_jobs: dict[str, tuple[float, list[int] | None]] = {}
    closed_jobs: set[str] = set()
    open_llm: dict = {}
    job_bars: list[tuple[Bar, list[int] | None]] = []
    orphans = 0
    for e in events:
        t, kind, lane = e["t"] - t0, e["type"], e["lane"]
        if kind == "node_started":
            open_nodes[(lane, e["node"])] = t
        elif kind == "node_finished" and (lane, e["node"]) in open_nodes:
            bars.append(Bar(f"node {lane}", e["node"], open_nodes.pop((lane, e["node"])), t))
        elif kind == "tool_call" and lane != "llm":
            open_steps[(lane, e["tool"])] = t
        elif kind == "tool_result" and (lane, e.get("tool")) in open_steps:
            name = "gpu steps" if lane == "gpu" else lane
            bars.append(Bar(name, e["tool"], open_steps.pop((lane, e["tool"])), t, e.get("status", "")))
        elif kind == "job_launched":
            started = open_jobs[e["key"]][0] if e["key"] in open_jobs else t  # re-attached: still the first start
            open_jobs[e["key"]] = (started, _gpus_of(e))
            closed_jobs.discard(e["key"])
        elif kind == "job_finished":
            if e["key"] not in open_jobs:
                orphans += e["key"] not in closed_jobs
                continue
            closed_jobs.add(e["key"])
            start, gpus = open_jobs.pop(e["key"])
            job_bars.append((Bar("", e["key"], start, t, e.get("status", "")), gpus))
        elif kind == "llm_request":
            open_llm[e.get("call")] = t
        elif kind == "llm_response" and e.get("status") != "retry" and e.get("call") in open_llm:
            bars.append(Bar("LLM", f"call {e.get('call')}", open_llm.pop(e.get("call")), t, e.get("status", "")))
    for key, (start, gpus) in open_jobs.items():  # still running when the trace ends
        job_bars.append((Bar("", key, start, end_t, "running at end"), gpus))
    if orphans:
        notes.append(f"{orphans} job_finished events had no job_launched (not drawn)")
    gpus = sorted({g for _, gs in job_bars for g in (gs or [])} | set(known_gpus))
    for bar, gs in job_bars:
        if gs == []:
            bars.append(Bar(CLIENTS, bar.label, bar.start, bar.end, bar.status))
            continue
        for g in (gs if gs is not None else gpus) or [None]:
            bars.append(Bar(f"GPU {g}" if g is not None else "GPU (unassigned)", bar.label, bar.start, bar.end,
                            bar.status))
    return _figures(bars, gpus, end_t, notes)


def _figures(bars: list[Bar], gpus: list[int], span: float, notes: list[str]) -> Timeline:
    research = [(b.start, b.end) for b in bars if b.lane == "research"]
    jobs = [(b.start, b.end) for b in bars if b.lane.startswith("GPU ")]
    basis = "GPU jobs"
    if not jobs:
        jobs = [(b.start, b.end) for b in bars if b.lane == "gpu steps"]
        basis = "GPU-lane steps (this run launched no job)"
    research_time = measure(research)
    overlap = 100.0 * intersect(research, jobs) / research_time if research_time > 0 else None
    idle = None
    if gpus and span > 0:
        busy = sum(measure([(b.start, b.end) for b in bars if b.lane == f"GPU {g}"]) for g in gpus)
        idle = 100.0 * (1.0 - busy / (len(gpus) * span))
    path, slack = critical_path([b for b in bars if b.lane.startswith("node")])
    return Timeline(span, bars, gpus, overlap, idle, basis, path, slack, notes)


def critical_path(nodes: list[Bar]) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Walk node spans in start order; among spans that ran side by side, the last to end is critical."""
    path: list[tuple[str, float]] = []
    slack: list[tuple[str, float]] = []
    group: list[Bar] = []
    for bar in sorted(nodes, key=lambda b: (b.start, b.end)) + [None]:
        if bar is not None and group and bar.start < max(g.end for g in group):
            group.append(bar)
            continue
        if group:
            last = max(group, key=lambda g: g.end)
            path.append((last.label, last.seconds))
            slack += [(g.label, last.end - g.end) for g in group if g is not last]
        group = [bar] if bar is not None else []
    return path, slack
