"""A campaign on the doubles, as the user runs it: does the agent add more than 5 % to the GPU time?

Runs the whole campaign (`dsv4-agent "enable MTP and tune kernels"`) on the doubles
(benchmarks/campaign_doubles.py: fake GPUs, tuning-script double, SGLang server double, SGLang's
real bench client) and reads the run folder:

  wall ÷ GPU critical path   wall = the agent process from start to exit, timed here; the GPU
                             critical path = the union of the GPU jobs' intervals (tuning,
                             servers, benchmark points) from the job ledger, the reference
                             measured in the same run. Goal <= 1.05.
  research under GPU jobs    % of the research lane's time inside that union.
  before / after the GPU     agent time before the first GPU job starts (split at the trace's
                             run_started: the command's checks and imports before it, the graph's
                             way to the first launch after it) and after the last ends.

    .venv/bin/python benchmarks/overlap.py [--runs 3] [--unit-s 1.0]

Each campaign is a first run on its tree: the research cache on and empty (harness.first_run_env),
so the command's check of the MTP evidence reads the tree and the research lane finds its result.
--unit-s is the tuning double's time per unit (18 units per GPU); real tuning runs for tens of
minutes, so larger values are closer to the real ratio.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.report.timeline import intersect, measure, union  # noqa: E402
from agent.run.trace import read_trace  # noqa: E402
from benchmarks.harness import AGENT, finish, first_run_env, row  # noqa: E402
from benchmarks.campaign_doubles import campaign_args, campaign_env, package_copy  # noqa: E402
from tools.source.resolve import ensure_wheel_source  # noqa: E402

GOAL = 1.05


def job_intervals(run: Path) -> list[tuple[float, float]]:
    spans = []
    for folder in sorted((run / "jobs").iterdir()):
        launch, ended = folder / "launch.json", folder / "exit.json"
        if folder.is_dir() and launch.exists() and ended.exists():
            spans.append((json.loads(launch.read_text())["launched_at"], json.loads(ended.read_text())["ended_at"]))
    return spans


def one_campaign(package: Path, unit_s: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        args = campaign_args(root, package)  # builds the checkout and the tokenizer: not measured
        env = first_run_env(root, campaign_env(root, unit_s=unit_s))  # the research cache on, empty
        started = time.time()
        subprocess.run([AGENT, *args], cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
        ended = time.time()
        run = next((root / "runs").iterdir())
        events = read_trace(run / "trace.jsonl").events
        spans = job_intervals(run)
        gpu = union(spans)
        lanes = {e["node"]: e["t"] for e in events if e["type"] == "node_started"}
        run_started = next(e["t"] for e in events if e["type"] == "run_started")
        research = [(lanes["research_lane"], next(e["t"] for e in events if e["type"] == "node_finished"
                                                  and e["node"] == "research_lane"))]
        return {"ratio": (ended - started) / measure(gpu), "wall": ended - started, "gpu": measure(gpu),
                "research_in_gpu": 100 * intersect(research, gpu) / max(measure(research), 1e-9),
                "before": min(s for s, _ in spans) - started, "to_run_started": run_started - started,
                "run_started_to_job": min(s for s, _ in spans) - run_started, "after": ended - max(e for _, e in spans)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--unit-s", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dsv4-bench-overlap-") as tmp:
        package = package_copy(ensure_wheel_source("0.5.23"), Path(tmp) / "sglang")
        results = [one_campaign(package, args.unit_s) for _ in range(args.runs)]
    col = {k: [r[k] for r in results] for k in results[0]}
    ref = f"GPU critical path {statistics.median(col['gpu']):.1f} s"
    return finish([
        row("overlap", f"campaign on doubles ({args.unit_s:g} s/unit): wall ÷ GPU path", col["ratio"], "x", ref,
            f"<= {GOAL}", GOAL),
        row("overlap", "  agent before the first GPU job", col["before"], "s", ref),
        row("overlap", "    of which process start to run_started", col["to_run_started"], "s", ref),
        row("overlap", "    of which run_started to the first launch", col["run_started_to_job"], "s", ref),
        row("overlap", "  agent after the last GPU job, to exit", col["after"], "s", ref),
        row("overlap", "  research lane inside GPU jobs", col["research_in_gpu"], "%", ref),
    ])


if __name__ == "__main__":
    sys.exit(main())
