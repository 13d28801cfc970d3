"""Plain-text views of a run folder for ``status`` and ``jobs``."""
from __future__ import annotations

import json
import time

from agent.runfolder import RunFolder
from agent.trace import TraceError, read_trace
from tools.jobs import JobState


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header), fmt.format(*["-" * w for w in widths]),
                      *[fmt.format(*map(str, r)) for r in rows]])


def render_jobs(jobs: list[JobState]) -> str:
    if not jobs:
        return "no jobs in this run"
    now = time.time()
    rows = []
    for j in jobs:
        took = (j.ended_at or now) - j.launched_at if j.launched_at else None
        rows.append([j.key, j.kind, j.status, ",".join(map(str, j.gpus)) if j.gpus is not None else "-",
                     f"{took:.1f}s" if took is not None else "-", j.reason or ""])
    return _table(rows, ["job", "kind", "status", "gpus", "time", "note"])


def render_status(run: RunFolder) -> str:
    config = run.read_json("config.json")
    lines = [f"run:    {run.path}", f"goal:   {config.get('goal')}"]
    result = run.result
    lines.append(f"result: {result['status']} — {result['summary']}" if result else "result: (not finished)")
    if result and result.get("next"):
        lines.append(f"next:   {result['next']}")
    steps_dir = run.path / "steps"
    if (run.path / "plan.json").exists():
        rows = []
        for step in run.read_json("plan.json"):
            path = steps_dir / f"{step['kind']}.json"
            outcome = json.loads(path.read_text()) if path.exists() else {}
            rows.append([step["kind"], step["lane"], outcome.get("status", "pending"), outcome.get("summary", "")[:90]])
        lines += ["", _table(rows, ["step", "lane", "status", "summary"])]
    if run.trace_path.exists():
        try:
            trace = read_trace(run.trace_path)
            lines += ["", f"trace: {len(trace.events)} events"]
            if trace.warning:
                lines.append(f"trace: {trace.warning}")
        except TraceError as err:
            lines += ["", f"trace: unreadable: {err}"]
    return "\n".join(lines)
