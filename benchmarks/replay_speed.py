"""Replay and timeline speed on a synthetic 10,000-event trace (goals: replay < 1 s, timeline < 2 s).

The trace is the committed golden run with 10,000 tool-internal events (progress, job_state,
job_launched/finished on four GPUs) inserted inside its GPU step, as a long tuning job writes them;
replay must read and classify them all but re-drives only the campaign's decisions. Reference:
``read_trace`` (the plain reader) of the same file, measured in this process. Prints medians.
"""
from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.replay.driver import replay_run  # noqa: E402
from agent.report.timeline_view import render_terminal, timeline_for_run, write_png  # noqa: E402
from agent.trace import read_trace  # noqa: E402

GOLDEN = ROOT / "tests" / "golden" / "playbook-mtp-tune"
FILLER = 10_000
REPEATS = 5


def synthetic_run(dest: Path) -> Path:
    shutil.copytree(GOLDEN, dest)
    events = [json.loads(line) for line in (GOLDEN / "trace.jsonl").read_text().splitlines()]
    at = next(i for i, e in enumerate(events) if e["type"] == "tool_call" and e["tool"] == "tune_kernels")
    t0, t1 = events[at]["t"], events[at + 1]["t"]
    filler = []
    for n in range(FILLER):
        gpu, key = n % 4, f"tune-gpu{n % 4}-{n // 400}"
        t = t0 + (t1 - t0) * n / FILLER
        kind = {0: "job_launched", 399: "job_finished"}.get((n // 4) % 100, "job_state" if n % 3 else "progress")
        data = {"key": key, "gpu": gpu, "status": "running" if kind != "job_finished" else "succeeded"}
        if kind == "progress":
            data = {"message": f"GPU {gpu}: {n} units tuned", "key": key}
        filler.append({"v": 1, "seq": 0, "t": t, "mono": t, "pid": events[0]["pid"], "lane": "gpu", "type": kind, **data})
    events = events[:at + 1] + filler + events[at + 1:]
    for seq, event in enumerate(events):
        event["seq"] = seq
    (dest / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return dest


def median_seconds(fn) -> float:
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = synthetic_run(Path(tmp) / "run")
        count = len(read_trace(run / "trace.jsonl").events)
        report = replay_run(run)
        assert report.exit_code == 0, report.render()
        reference = median_seconds(lambda: read_trace(run / "trace.jsonl"))
        replay = median_seconds(lambda: replay_run(run))

        def timeline() -> None:
            tl, _ = timeline_for_run(run)
            render_terminal(tl)
            write_png(tl, Path(tmp) / "timeline.png")

        drawn = median_seconds(timeline)
    print(f"trace: {count} events; median of {REPEATS}")
    print(f"read_trace (reference): {reference:.3f} s")
    print(f"replay:   {replay:.3f} s  ({replay / reference:.1f}x reference; goal < 1 s: {'met' if replay < 1 else 'MISSED'})")
    print(f"timeline: {drawn:.3f} s  ({drawn / reference:.1f}x reference; goal < 2 s: {'met' if drawn < 2 else 'MISSED'})")


if __name__ == "__main__":
    main()
