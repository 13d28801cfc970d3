"""What every benchmark shares: timing whole processes, medians with their spread, goals, exit codes.

A benchmark measures something a user waits for (a process from start to exit wherever the
user runs one), several times, beside a reference measured in the same rounds so that a loaded
machine shows in both. It ends with ``finish(rows)``: a table on stdout, the rows as JSON in
``$DSV4_BENCH_OUT`` when ``benchmarks/run_all.py`` asks for them, and exit status 1 when any
goal was missed.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
AGENT = str(Path(sys.executable).with_name("dsv4-agent"))
OUT_ENV = "DSV4_BENCH_OUT"


@dataclass
class Row:
    benchmark: str
    metric: str
    median: float
    low: float              # the spread: fastest and slowest run
    high: float
    unit: str               # "s", "ms", "x", "%"
    reference: str          # what it was measured beside, with that reference's median
    goal: str               # e.g. "<= 0.2 s"; "" for a figure without a goal
    ok: bool | None         # None: no goal

    def cell(self) -> str:
        fmt = {"s": "{:.2f} s", "ms": "{:.0f} ms", "x": "{:.3f}", "%": "{:.1f} %"}[self.unit]
        spread = f" ({fmt.format(self.low)}–{fmt.format(self.high)})" if self.high > self.low else ""
        return fmt.format(self.median) + spread


def clean_env(extra: dict | None = None) -> dict:
    """The user's environment without the agent's settings, and with the research cache off: each
    process reads the SGLang tree as a first run does (mtp_inference.py times the cached case)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSV4_", "OPENAI_"))}
    env["DSV4_RESEARCH_CACHE"] = "off"
    env.update(extra or {})
    return env


def first_run_env(scratch: Path, extra: dict | None = None) -> dict:
    """``clean_env`` as a user's first run meets it: the research cache on and empty (its own
    DSV4_CACHE_DIR under ``scratch``), so a result is computed once and then found, as it is the first
    time a campaign reads a tree. What else lives in the cache (the SGLang wheel, the bench client
    double's bytecode) is the user's, linked in: it is not what a first campaign on a tree pays."""
    real = Path(os.environ.get("DSV4_CACHE_DIR") or Path.home() / ".cache" / "dsv4-agent")
    cache = scratch / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    for shared in ("sglang-src", "bench-client-bytecode"):
        (real / shared).mkdir(parents=True, exist_ok=True)
        if not (cache / shared).exists():
            (cache / shared).symlink_to(real / shared)
    env = clean_env({"DSV4_CACHE_DIR": str(cache), **(extra or {})})
    env.pop("DSV4_RESEARCH_CACHE", None)
    return env


def time_process(argv: list[str], cwd: Path | None = None, env: dict | None = None, check: bool = True) -> float:
    """Wall seconds of one process, start to exit, output discarded."""
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - started
    if check and done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return took


def row(benchmark: str, metric: str, samples: list[float], unit: str, reference: str, goal: str = "",
        limit: float | None = None, scale: float = 1.0) -> Row:
    """A row from raw samples (seconds or ratios); ``limit`` is the goal's upper bound in ``unit``."""
    values = [s * scale for s in samples]
    median = statistics.median(values)
    return Row(benchmark, metric, median, min(values), max(values), unit, reference, goal,
               None if limit is None else median <= limit)


def finish(rows: list[Row]) -> int:
    """Print the rows, hand them to run_all.py, and return the exit status (1 on a missed goal)."""
    for r in rows:
        verdict = "" if r.ok is None else ("  met" if r.ok else "  MISSED")
        goal = f"  goal {r.goal}" if r.goal else ""
        print(f"{r.metric:52s} {r.cell():>26s}  [{r.reference}]{goal}{verdict}")
    out = os.environ.get(OUT_ENV)
    if out:
        Path(out).write_text(json.dumps([asdict(r) for r in rows]))
    return 1 if any(r.ok is False for r in rows) else 0
