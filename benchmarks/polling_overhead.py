"""The agent's CPU use while 8 tuning jobs run (goal: a few % of one core at most).

Eight real detached jobs (the generated driver around the tuning-script double, one per fake
GPU, each unit sleeping like a GPU-bound tuner) run under LocalExecutor while tools.tuning.fanout
polls them every second, parses their logs and emits events (to a JSONL file, like the trace).
CPU % = process CPU time of this (agent) process / wall time. Reference measured in the same
process: an idle loop that only sleeps at the same 1 s cadence for the same wall time.
Goal: <= 2 % of one core (median of 3 runs).

    .venv/bin/python benchmarks/polling_overhead.py
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.campaign_doubles import SCRIPT_DOUBLE  # noqa: E402
from benchmarks.harness import finish, row  # noqa: E402
from tools.jobs import LocalExecutor  # noqa: E402
from tools.tuning.fanout import FanoutJob, run_fanout  # noqa: E402
from tools.tuning.plan import make_units, plan_units  # noqa: E402
from tools.tuning.render import render_tuning  # noqa: E402
from tools.tuning.script import introspect_script  # noqa: E402
from tools.tuning.shapes import parse_user_shapes  # noqa: E402

GPUS = 8
RUNS = 3
GOAL_PCT = 2.0


def by_shape(units) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for u in units:
        groups.setdefault(f"{u.n},{u.k}", []).append(u.m)
    return groups


def one_run(folder: Path) -> tuple[float, float]:
    units = make_units(parse_user_shapes(["4096,7168", "7168,2048", "3072,1536"]), [1, 8, 64, 512, 4096, 8192])
    plan = plan_units(units, list(range(GPUS)))
    rendered = render_tuning(folder / "tuning", plan.per_gpu, introspect_script(SCRIPT_DOUBLE),
                             python=sys.executable, device_name="NVIDIA H200")
    jobs = [FanoutJob(gpu=w.gpu, key=f"tune-gpu{w.gpu}", argv=["bash", str(folder / rendered.scripts[w.gpu])],
                      cwd=str(folder / "tuning"), unit_ids=[u.id for u in w.units],
                      units_by_shape=by_shape(w.units),
                      env={"DSV4_TUNING_SCRIPT": str(SCRIPT_DOUBLE), "DSV4_DOUBLE_UNIT_S": "1.5"})
            for w in plan.per_gpu]
    with open(folder / "trace.jsonl", "a") as events:
        def emit(kind: str, data: dict) -> None:
            events.write(json.dumps({"type": kind, **data}) + "\n")
            events.flush()
            os.fsync(events.fileno())

        cpu0, wall0 = time.process_time(), time.monotonic()
        result = run_fanout(LocalExecutor(folder / "jobs"), jobs, emit, poll_s=1.0)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    assert result.ok, [j.reason for j in result.jobs]
    return 100 * cpu / wall, wall


def idle(wall: float) -> float:
    cpu0, end = time.process_time(), time.monotonic() + wall
    while time.monotonic() < end:
        time.sleep(1.0)
    return 100 * (time.process_time() - cpu0) / wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=RUNS)
    ours, refs, walls = [], [], []
    for _ in range(parser.parse_args().runs):
        with tempfile.TemporaryDirectory() as tmp:
            pct, wall = one_run(Path(tmp))
        ours.append(pct)
        walls.append(wall)
        refs.append(idle(wall))
    ref = f"idle 1 s sleep loop {statistics.median(refs):.2f} %; {GPUS} jobs, {statistics.median(walls):.0f} s"
    return finish([row("polling_overhead", f"agent CPU while {GPUS} tuning jobs run (% of one core)", ours, "%", ref,
                       f"<= {GOAL_PCT:g} %", GOAL_PCT)])


if __name__ == "__main__":
    sys.exit(main())
