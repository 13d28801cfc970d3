"""Run every benchmark and print the table docs/benchmarks.md quotes (with the date and the machine).

    .venv/bin/python benchmarks/run_all.py [--quick] [--write-docs] [--only NAME ...]

Each benchmark runs as its own process (so one's imports and caches never flatter another) and
hands its rows back through ``$DSV4_BENCH_OUT`` (benchmarks/harness.py). ``--write-docs`` writes
the table into docs/benchmarks.md between the ``benchmarks:begin`` / ``benchmarks:end`` markers,
so the figures there are regenerated, never copied by hand. ``--quick`` passes fewer runs (for a
smoke check; the documented figures come from a full run). A benchmark that needs a GPU (or an OpenSSH server) is
skipped, and says so, where ``nvidia-smi`` finds none (or there is no ``sshd``). Exit 0 only when every goal holds.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import OUT_ENV, REPO, Row  # noqa: E402
from tools.markdown import Markdown, markdown_table, md_code  # noqa: E402

HERE = Path(__file__).resolve().parent
# (script, what it measures, arguments of a full run, of a quick run, what it needs that a machine may lack)
BENCHMARKS = [
    ("cli_startup.py", "--version, -h, read-only commands, every --help ÷ python -c pass (processes)", [], ["--runs", "3"], None),
    ("planned_campaign.py", "a campaign planned without GPUs (process)", [], ["--runs", "2"], None),
    ("overlap.py", "a campaign on the doubles, start to exit ÷ GPU critical path", [], ["--runs", "1"], None),
    ("search_vs_rg.py", "evidence search ÷ raw `rg`, every query shape", [], ["--rounds", "3"], None),
    ("mtp_inference.py", "`mtp --json` processes on the wheel, the corpus checkout, 2x and 4x trees", [],
     ["--rounds", "2"], None),
    ("replay_speed.py", "replay and timeline of a 10,000-event trace", [], ["--repeats", "2"], None),
    ("tuning_assignment.py", "tuning fan-out makespan on real jobs ÷ lower bound, vs SGLang's split", [],
     ["--unit-s", "0.3", "--rounds", "1"], None),
    ("parse_results.py", "parsing 10,000 benchmark records ÷ bare json.loads", [], ["--rounds", "3"], None),
    ("search_budget.py", "a --budget search ÷ a full measurement of its space, on the doubles", [], [], None),
    ("polling_overhead.py", "agent CPU while 8 tuning jobs run", [], ["--runs", "1"], None),
    ("sync_commit_listing.py", "listing 300 upstream commits with their files", [], ["--repeat", "2"], None),
    ("ssh_calls.py", "SSH ledger calls on the shared connection ÷ each on its own (real sshd)", [],
     ["--rounds", "2"], "sshd"),
    ("gpu_real_tuning.py", "real Triton FP8 tuning jobs, one per GPU", [], [], "gpu"),
    ("gpu_block32_tuning.py", "SGLang's block-FP8 kernel at [32, 32]: tuned ÷ its default config", [], [], "gpu"),
]
BEGIN, END = "<!-- benchmarks:begin -->", "<!-- benchmarks:end -->"
SKIPPED = "not run here: "
LACKING = {"gpu": SKIPPED + "no GPU (nvidia-smi finds none)", "sshd": SKIPPED + "no OpenSSH server (sshd)"}


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown CPU") \
        if Path("/proc/cpuinfo").exists() else platform.processor()
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, {platform.system()}"


def has_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    return bool(smi) and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


def run_one(script: str, args: list[str]) -> tuple[list[Row], int, str, float]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        path = Path(out.name)
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(HERE / script), *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, OUT_ENV: str(path)})
    took = time.monotonic() - started
    rows = [Row(**r) for r in json.loads(path.read_text())] if path.stat().st_size else []
    path.unlink()
    return rows, done.returncode, (done.stdout + done.stderr).strip(), took


def table(results: list[tuple[str, str, list[Row], int, str]]) -> str:
    cells: list[list[object]] = []
    for script, what, rows, code, note in results:
        if not rows:  # a GPU benchmark without a GPU, or a script that prints its own figures only
            verdict = ("skipped" if note.startswith(SKIPPED) else "ran") if code == 0 else \
                Markdown(f"**failed** (exit {code})")
            cells.append([md_code(script), what, note, "", "", verdict])
            continue
        for i, r in enumerate(rows):
            verdict = "" if r.ok is None else ("met" if r.ok else Markdown("**missed**"))
            cells.append([md_code(script) if i == 0 else "", r.metric, r.cell(), r.reference, r.goal, verdict])
    return markdown_table(["benchmark", "measures", "median (min–max)", "measured beside", "goal", ""], cells)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer runs each (a smoke check)")
    parser.add_argument("--write-docs", action="store_true", help="write the table into docs/benchmarks.md")
    parser.add_argument("--only", nargs="*", help="run only these scripts (e.g. cli_startup.py)")
    opts = parser.parse_args()
    present = {"gpu": has_gpu(), "sshd": bool(shutil.which("sshd") or Path("/usr/sbin/sshd").exists())}
    load_before = os.getloadavg()[0]
    results = []
    for script, what, full, quick, needs in BENCHMARKS:
        if opts.only and script not in opts.only:
            continue
        if needs and not present[needs]:
            results.append((script, what, [], 0, LACKING[needs]))
            print(f"== {script}: skipped, {LACKING[needs]}", flush=True)
            continue
        print(f"== {script}", flush=True)
        rows, code, output, took = run_one(script, quick if opts.quick else full)
        print(output, flush=True)
        note = output.splitlines()[-1][:120] if output and not rows else ""
        results.append((script, what, rows, code, note))
        print(f"   ({took:.0f} s, exit {code})", flush=True)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"  # other work on the machine
    text = (f"Measured {stamp} on {machine()}, {load}{' (quick runs)' if opts.quick else ''} by "
            f"`benchmarks/run_all.py`:\n\n{table(results)}\n")
    print("\n" + text)
    if opts.write_docs:
        doc = REPO / "docs" / "benchmarks.md"
        body = doc.read_text()
        head, _, rest = body.partition(BEGIN)
        _, _, tail = rest.partition(END)
        doc.write_text(f"{head}{BEGIN}\n{text}{END}{tail}")
    failed = any(code != 0 for _s, _w, _r, code, _n in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
