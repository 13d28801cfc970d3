"""A budgeted search against a full measurement of the same space: the same pick, at half the points or fewer?

Runs two campaigns on the doubles (benchmarks/campaign_doubles.py: the server double, SGLang's real
bench client) on one tree whose recipes draft 1, 3 and 5 steps (the recipe overlays of the decision and
search tests, copied in as files), so the fenced space is step counts 1..5:

  search    `dsv4-agent "enable MTP" --budget 30m`: first look, drops, the survivors' repeats
  full      the same space, every setting at every repeat (`--mtp-steps` names the step counts no
            recipe has), no budget

and reads each run folder: the points measured (lines of bench/*.jsonl), the GPU time (the union of the
server jobs' intervals from the job ledger: the time a server held the GPUs) and the deployed setting.
Goals: the search deploys what the full measurement deploys, and its points ÷ the whole space's
(every setting of the search's space at every level and repeat) is <= 0.5. The server double gives
5/1/6 a clear lead (DSV4_DOUBLE_SPEC_PROFILE), as a search needs to save.

    .venv/bin/python benchmarks/search_budget.py [--runs 1]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.report.timeline import measure, union  # noqa: E402
from benchmarks.harness import AGENT, REPO, finish, first_run_env, row  # noqa: E402
from benchmarks.campaign_doubles import (DOUBLES, MODEL, build_tokenizer, campaign_env, make_checkout,  # noqa: E402
                                         package_copy)
from tools.source.resolve import ensure_wheel_source  # noqa: E402

GOAL = 0.5
REPEATS, LEVELS = 4, "1,4"
OVERLAYS = [REPO / "tests" / "fixtures" / "decision" / "test", REPO / "tests" / "fixtures" / "search" / "test"]
PROFILE = json.dumps({"5/1/6": {"accept": 5, "cost": 0.02}})


def _server_seconds(run: Path) -> float:
    spans = []
    for folder in sorted((run / "jobs").glob("serve-*")):
        launch, ended = folder / "launch.json", folder / "exit.json"
        if launch.exists() and ended.exists():
            spans.append((json.loads(launch.read_text())["launched_at"], json.loads(ended.read_text())["ended_at"]))
    return measure(union(spans))


def _campaign(root: Path, name: str, args: list[str], env: dict) -> dict:
    folder = root / name
    folder.mkdir()
    subprocess.run([AGENT, *args], cwd=folder, env=env, check=True, stdout=subprocess.DEVNULL)
    run = next((folder / "runs").iterdir())
    lines = {p.stem: len(p.read_text().splitlines()) for p in (run / "bench").glob("*.jsonl")
             if not p.name.endswith(".failures.jsonl")}
    plan = json.loads((run / "measure_plan.json").read_text())
    return {"run": run, "points": sum(lines.values()), "gpu_s": _server_seconds(run), "plan": plan,
            "pick": json.loads((run / "verdict.json").read_text())["recommended"]}


def one_round(package: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="dsv4-bench-search-") as tmp:
        root = Path(tmp)
        checkout = make_checkout(root, package)
        for overlay in OVERLAYS:
            shutil.copytree(overlay, checkout / "test", dirs_exist_ok=True)
        tok = build_tokenizer(root / "tok")
        env = first_run_env(root, {**campaign_env(root, gpus=1), "DSV4_DOUBLE_SPEC_PROFILE": PROFILE,
                                   "DSV4_DOUBLE_STEP_MS": "4"})
        base = ["enable MTP", "--sglang", str(checkout), "--sglang-python", str(DOUBLES / "sglang_python"),
                "--model", MODEL, "--model-path", str(tok), "--tokenizer", str(tok), "--concurrency", LEVELS,
                "--input-len", "8", "--output-len", "24", "--prompts-per-concurrency", "2", "--min-prompts", "4",
                "--repeats", str(REPEATS)]
        search = _campaign(root, "search", [*base, "--budget", "30m"], env)
        steps = sorted({f["value"] for v in search["plan"]["variants"] for f in v["flags"]
                        if f["flag"] == "--speculative-num-steps"})
        full = _campaign(root, "full", [*base, "--mtp-steps", ",".join(steps)], env)
        space = len(search["plan"]["variants"]) * len(LEVELS.split(",")) * REPEATS
        return {"share": search["points"] / space, "same": float(search["pick"] == full["pick"]),
                "search_gpu": search["gpu_s"], "full_gpu": full["gpu_s"], "search_points": search["points"],
                "full_points": full["points"], "space": space, "pick": f"{search['pick']} / {full['pick']}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dsv4-bench-search-pkg-") as tmp:
        package = package_copy(ensure_wheel_source("0.5.23"), Path(tmp) / "sglang")
        results = [one_round(package) for _ in range(args.runs)]
    col = {k: [r[k] for r in results] for k in results[0] if k != "pick"}
    picks = "; ".join(r["pick"] for r in results)
    full_gpu = f"full measurement {sorted(col['full_gpu'])[len(results) // 2]:.1f} s GPU"
    return finish([
        row("search_budget", "GPU time: search (servers holding the GPUs)", col["search_gpu"], "s", full_gpu),
        row("search_budget", "GPU time: search ÷ full", [s / f for s, f in zip(col["search_gpu"], col["full_gpu"])],
            "x", full_gpu),
        row("search_budget", "points: search ÷ the whole space", col["share"], "x",
            f"space {results[0]['space']} points, full run measured {results[0]['full_points']}", f"<= {GOAL}", GOAL),
        row("search_budget", "picks differ from the full measurement (0: same pick)", [1 - s for s in col["same"]],
            "x", f"search / full: {picks}", "= 0", 0.0),
    ])


if __name__ == "__main__":
    sys.exit(main())
