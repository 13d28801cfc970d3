"""What 10,000 trace events add to `dsv4-agent replay RUN` and `--timeline`, as the user runs them.

The trace is the committed golden run with 10,000 tool-internal events (progress, job_state,
job_launched/finished on four GPUs) inserted inside its GPU step, as a long tuning job writes them;
replay must read and classify them all but re-drives only the campaign's decisions. Each round
runs the whole `dsv4-agent replay` process on that run and, as the reference, on the golden run
itself (the same campaign without the 10,000 events), right after or right before it (taking
turns), so that load on the machine hits both alike.
Goals, as ratios of the same rounds: the 10,000-event replay <= 1.4x the golden run's, and its
--timeline (terminal, PNG, report section) <= 1.5x the golden run's --timeline.

    .venv/bin/python benchmarks/replay_speed.py [--repeats 7]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import AGENT, clean_env, finish, row, time_process  # noqa: E402

GOLDEN = ROOT / "tests" / "golden" / "playbook-mtp-tune"
FILLER = 10_000
REPLAY_GOAL, TIMELINE_GOAL = 1.4, 1.5


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    repeats = parser.parse_args().repeats
    env = clean_env()
    with tempfile.TemporaryDirectory() as tmp:
        big = synthetic_run(Path(tmp) / "big")
        small = Path(tmp) / "small"
        shutil.copytree(GOLDEN, small)
        walls: dict[str, list[float]] = {"big": [], "small": [], "big_tl": [], "small_tl": []}
        for n in range(repeats):
            # each figure beside its reference, back to back, taking turns at going first: a quiet or
            # busy stretch of a shared machine falls on both alike
            for view in ([], ["--timeline"]):
                pair = [("big", big), ("small", small)]
                for name, run in (reversed(pair) if n % 2 else pair):
                    wall = time_process([AGENT, "replay", str(run), *view], env=env)
                    walls[name + ("_tl" if view else "")].append(wall)
    replay = [a / b for a, b in zip(walls["big"], walls["small"], strict=True)]
    timeline = [a / b for a, b in zip(walls["big_tl"], walls["small_tl"], strict=True)]
    ref = f"golden run replay {statistics.median(walls['small']):.2f} s"
    ref_tl = f"golden run --timeline {statistics.median(walls['small_tl']):.2f} s"
    return finish([
        row("replay_speed", "dsv4-agent replay, 10,000-event run (process)", walls["big"], "s", ref),
        row("replay_speed", "  ÷ golden run replay (same rounds)", replay, "x", ref, f"<= {REPLAY_GOAL:g}", REPLAY_GOAL),
        row("replay_speed", "dsv4-agent replay --timeline, 10,000-event run", walls["big_tl"], "s", ref_tl),
        row("replay_speed", "  ÷ golden run --timeline (same rounds)", timeline, "x", ref_tl,
            f"<= {TIMELINE_GOAL:g}", TIMELINE_GOAL),
    ])


if __name__ == "__main__":
    sys.exit(main())
