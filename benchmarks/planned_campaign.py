"""A campaign planned on a machine without GPUs, as the user runs it: `dsv4-agent "enable MTP and tune kernels"`.

    .venv/bin/python benchmarks/planned_campaign.py [--runs 5]

Each run is the whole process in a fresh folder, a first run on its tree (the research cache on and
empty: harness.first_run_env; source: the cached sglang 0.5.23 wheel;
`--nvidia-smi` names a program that does not exist, so even a GPU host plans instead of running).
The trace's first and last events split the wall time into start-up (process start to
run_started), the campaign (run_started to run_finished) and exit (run_finished to process exit).
Reference, in the same rounds: the two things a planned campaign cannot do without, each a process
of its own on the same first-run footing: `dsv4-agent mtp --json` for the same model on the same
tree (its research, from an empty research cache) plus a process that only imports LangGraph's
graph machinery (the campaign's graph). Goal: the median of wall ÷ their sum <= 1.25, i.e. the
plan, the scripts, the report, the trace and the checkpoints add at most a quarter. The wall ÷
the LangGraph import alone, and a bare interpreter start, are shown beside it.
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

from benchmarks.harness import AGENT, clean_env, finish, first_run_env, row, time_process  # noqa: E402
from tools.source.resolve import ensure_wheel_source  # noqa: E402

GOAL = "enable MTP and tune kernels"
GOAL_RATIO = 1.25
LANGGRAPH = [sys.executable, "-c", "import langgraph.graph"]
MODEL = "deepseek-ai/DeepSeek-V4-Flash"  # the campaign's default model, named for `mtp`


def research_alone() -> float:
    """`mtp --json` for the campaign's model on its default tree, from an empty research cache."""
    with tempfile.TemporaryDirectory() as tmp:
        return time_process([AGENT, "mtp", "--model", MODEL, "--json"], cwd=tmp, env=first_run_env(Path(tmp)))


def one_run() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.time()
        done = subprocess.run([AGENT, GOAL, "--nvidia-smi", str(Path(tmp) / "no-nvidia-smi")], cwd=tmp,
                              env=first_run_env(Path(tmp)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        ended = time.time()
        if done.returncode != 0:
            raise SystemExit(f"the campaign exited {done.returncode}: {done.stderr.decode()[-2000:]}")
        run = next((Path(tmp) / "runs").iterdir())
        assert json.loads((run / "result.json").read_text())["status"] == "planned"
        events = [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]
    return {"wall": ended - started, "startup": events[0]["t"] - started,
            "campaign": events[-1]["t"] - events[0]["t"], "exit": ended - events[-1]["t"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    ensure_wheel_source("0.5.23")  # downloading is not what is measured
    bare, langgraph, research, results = [], [], [], []
    for turn in range(runs):  # the campaign and its references take turns at going first
        references = [lambda: bare.append(time_process([sys.executable, "-c", "pass"], env=clean_env())),
                      lambda: langgraph.append(time_process(LANGGRAPH, env=clean_env())),
                      lambda: research.append(research_alone())]
        for measure in (references + [lambda: results.append(one_run())])[::1 if turn % 2 else -1]:
            measure()
    ref = (f"mtp --json {statistics.median(research):.2f} s + import langgraph.graph {statistics.median(langgraph):.2f} s; "
           f"bare python {statistics.median(bare) * 1000:.0f} ms")
    parts = {k: [r[k] for r in results] for k in ("wall", "startup", "campaign", "exit")}
    return finish([
        row("planned_campaign", "planned campaign, process wall", parts["wall"], "s", ref),
        row("planned_campaign", "  ÷ (its research alone + the LangGraph import), same rounds",
            [w / (m + g) for w, m, g in zip(parts["wall"], research, langgraph, strict=True)], "x", ref,
            f"<= {GOAL_RATIO:g}", GOAL_RATIO),
        row("planned_campaign", "  ÷ the LangGraph import alone", [w / g for w, g in zip(parts["wall"], langgraph, strict=True)],
            "x", ref),
        row("planned_campaign", "  of which start-up (to run_started)", parts["startup"], "s", ref),
        row("planned_campaign", "  of which campaign (to run_finished)", parts["campaign"], "s", ref),
        row("planned_campaign", "  of which exit (run_finished to exit)", parts["exit"], "s", ref),
    ])


if __name__ == "__main__":
    sys.exit(main())
