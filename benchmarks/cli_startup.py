"""How fast `dsv4-agent --help` starts, against a bare interpreter start measured alongside.

    .venv/bin/python benchmarks/cli_startup.py [--runs 15]

Goal: median `--help` < 0.5 s (no LangGraph/openai import just for help).
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

AGENT = str(Path(sys.executable).with_name("dsv4-agent"))


def timed(argv: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
        out.append(time.perf_counter() - started)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    bare = statistics.median(timed([sys.executable, "-c", "pass"], runs))
    help_ = statistics.median(timed([AGENT, "--help"], runs))
    sub = statistics.median(timed([AGENT, "resume", "--help"], runs))
    print(f"bare python start     median {bare * 1000:7.1f} ms")
    print(f"dsv4-agent --help     median {help_ * 1000:7.1f} ms  ({help_ / bare:.2f}x bare python; goal < 500 ms)")
    print(f"dsv4-agent resume -h  median {sub * 1000:7.1f} ms  ({sub / bare:.2f}x bare python)")
    print("goal met" if help_ < 0.5 else "GOAL MISSED")


if __name__ == "__main__":
    main()
