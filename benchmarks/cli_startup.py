"""How fast `--help` answers, for the tool and every subcommand, as whole processes.

    .venv/bin/python benchmarks/cli_startup.py [--runs 11]

Each round times a bare interpreter start (`python -c pass`, the reference) and then every
`dsv4-agent [SUB] --help` once, so that load on the machine shows in all of them alike.
Goal: the median of every one of them <= 0.2 s.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import AGENT, clean_env, finish, row, time_process  # noqa: E402

SUBCOMMANDS = ["", "run", "resume", "status", "jobs", "runs", "report", "replay", "mtp", "sync",
               "tuning", "tuning plan", "tuning shapes", "tuning prove", "tuning uninstall"]
GOAL_S = 0.2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=11)
    runs = parser.parse_args().runs
    env = clean_env()
    bare: list[float] = []
    helps: dict[str, list[float]] = {sub: [] for sub in SUBCOMMANDS}
    for _ in range(runs):
        bare.append(time_process([sys.executable, "-c", "pass"], env=env))
        for sub in SUBCOMMANDS:
            helps[sub].append(time_process([AGENT, *sub.split(), "--help"], env=env))
    ref = f"bare python {statistics.median(bare) * 1000:.0f} ms"
    slowest = max((s for s in SUBCOMMANDS if s), key=lambda s: statistics.median(helps[s]))
    for sub in SUBCOMMANDS:
        print(f"  dsv4-agent {sub + ' ' if sub else ''}--help  median {statistics.median(helps[sub]) * 1000:6.1f} ms")
    return finish([
        row("cli_startup", "dsv4-agent --help", helps[""], "ms", ref, f"<= {GOAL_S * 1000:.0f} ms",
            GOAL_S * 1000, scale=1000),
        row("cli_startup", f"slowest subcommand --help ({slowest})", helps[slowest], "ms", ref,
            f"<= {GOAL_S * 1000:.0f} ms", GOAL_S * 1000, scale=1000),
    ])


if __name__ == "__main__":
    sys.exit(main())
