"""Does the research lane hide under the GPU lane, and what does the agent itself cost?

Runs the whole campaign (`dsv4-agent "enable MTP and tune kernels"`) on the test doubles of
tests/campaign_fixtures.py (fake GPUs, tuning-script double, SGLang server double, SGLang's
real bench client) and reads the run folder:

  wall ÷ GPU critical path   wall = run_started → run_finished; GPU critical path = the union
                             of the GPU jobs' intervals (tuning, servers, benchmark points),
                             from the job ledger. Goal ≤ 1.05: the agent adds ≤ 5 % to GPU time.
  research under GPU jobs    % of the research lane's time inside that union.
  overhead per node          node time not covered by any GPU job (ms).

    .venv/bin/python benchmarks/overlap.py [--runs 3] [--unit-s 1.0]

--unit-s is the tuning double's time per unit (18 units per GPU); real tuning runs for tens of
minutes, so larger values are closer to the real ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.report.timeline import intersect, measure, union  # noqa: E402
from agent.trace import read_trace  # noqa: E402
from tests.campaign_fixtures import campaign_args, campaign_env  # noqa: E402
from tools.source.resolve import ensure_wheel_source  # noqa: E402

AGENT = str(Path(sys.executable).with_name("dsv4-agent"))


def job_intervals(run: Path) -> list[tuple[float, float]]:
    spans = []
    for folder in sorted((run / "jobs").iterdir()):
        launch, ended = folder / "launch.json", folder / "exit.json"
        if folder.is_dir() and launch.exists() and ended.exists():
            spans.append((json.loads(launch.read_text())["launched_at"], json.loads(ended.read_text())["ended_at"]))
    return spans


def one_campaign(unit_s: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DSV4_", "OPENAI_"))}
        env.update(campaign_env(root, unit_s=unit_s))
        args = campaign_args(root, ensure_wheel_source("0.5.23"))
        subprocess.run([AGENT, *args], cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
        run = next((root / "runs").iterdir())
        events = read_trace(run / "trace.jsonl").events
        wall = events[-1]["t"] - events[0]["t"]
        gpu = union(job_intervals(run))
        nodes: dict[str, tuple[float, float]] = {}
        opened: dict[str, float] = {}
        for e in events:
            if e["type"] == "node_started":
                opened[e["node"]] = e["t"]
            elif e["type"] == "node_finished" and e["node"] in opened:
                nodes[e["node"]] = (opened.pop(e["node"]), e["t"])
        research = [nodes["research_lane"]] if "research_lane" in nodes else []
        overhead = {name: (end - start - intersect([(start, end)], gpu)) * 1000 for name, (start, end) in nodes.items()}
        return {"wall": wall, "gpu": measure(gpu), "research_in_gpu": intersect(research, gpu) / max(measure(research), 1e-9),
                "overhead_ms": overhead}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--unit-s", type=float, default=1.0)
    args = parser.parse_args()
    results = [one_campaign(args.unit_s) for _ in range(args.runs)]
    ratio = statistics.median(r["wall"] / r["gpu"] for r in results)
    print(f"campaigns: {args.runs}, tuning double {args.unit_s:g} s/unit")
    print(f"wall           median {statistics.median(r['wall'] for r in results):7.2f} s")
    print(f"GPU crit. path median {statistics.median(r['gpu'] for r in results):7.2f} s (union of GPU job intervals)")
    print(f"wall ÷ GPU critical path: median {ratio:.3f}  (goal ≤ 1.05) {'met' if ratio <= 1.05 else 'MISSED'}")
    print(f"research inside GPU jobs: median {100 * statistics.median(r['research_in_gpu'] for r in results):.1f} %")
    print("agent overhead per node (ms outside GPU jobs), median:")
    for name in results[0]["overhead_ms"]:
        print(f"  {name:14s} {statistics.median(r['overhead_ms'][name] for r in results):9.1f}")


if __name__ == "__main__":
    main()
