"""How fast the commands a user runs to look answer, as whole processes beside `python -c pass`.

    .venv/bin/python benchmarks/cli_startup.py [--runs 11]

Each round times a bare interpreter start (`python -c pass`, the reference) and then, once each,
`dsv4-agent --version`, `-h`, the read-only commands on a recorded run (`status`, `jobs`, `runs`;
the committed golden run, copied to a scratch folder), `replay` of that run, and every
subcommand's `--help`, so that load on the machine shows in all of them alike. Goals, as the
median of each ÷ the reference's median: `--version` and `-h` <= 3, `status`, `jobs`, `runs` <= 5,
the slowest subcommand `--help` <= 6. `replay` re-drives the recorded campaign through its graph:
it is shown beside the LangGraph import (`python -c "import langgraph.graph"`), with no goal here
(benchmarks/replay_speed.py has its goals).
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import AGENT, REPO, clean_env, finish, row, time_process  # noqa: E402

GOLDEN = REPO / "tests" / "golden" / "playbook-mtp-tune"
RUN = GOLDEN.name
SUBCOMMANDS = ["run", "resume", "status", "jobs", "runs", "report", "replay", "mtp", "sync",
               "tuning", "tuning plan", "tuning shapes", "tuning prove", "tuning uninstall"]
# (label, argv after dsv4-agent, goal as a multiple of a bare interpreter start)
READERS = [("--version", ["--version"], 3.0), ("-h", ["-h"], 3.0), ("status RUN", ["status", RUN], 5.0),
           ("jobs RUN", ["jobs", RUN], 5.0), ("runs", ["runs"], 5.0)]
HELP_GOAL = 6.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=11)
    runs = parser.parse_args().runs
    env = clean_env()
    bare: list[float] = []
    langgraph: list[float] = []
    readers: dict[str, list[float]] = {label: [] for label, _a, _g in READERS}
    replay: list[float] = []
    helps: dict[str, list[float]] = {sub: [] for sub in SUBCOMMANDS}
    with tempfile.TemporaryDirectory(prefix="dsv4-bench-cli-") as tmp:
        work = Path(tmp)
        shutil.copytree(GOLDEN, work / "runs" / RUN)
        for _ in range(runs):
            bare.append(time_process([sys.executable, "-c", "pass"], env=env))
            for label, argv, _goal in READERS:
                readers[label].append(time_process([AGENT, *argv], cwd=work, env=env))
            langgraph.append(time_process([sys.executable, "-c", "import langgraph.graph"], env=env))
            replay.append(time_process([AGENT, "replay", RUN], cwd=work, env=env))
            for sub in SUBCOMMANDS:
                helps[sub].append(time_process([AGENT, *sub.split(), "--help"], env=env))
    base = statistics.median(bare)
    ref = f"bare python {base * 1000:.0f} ms"
    rows = []
    for label, _argv, goal in READERS:
        rows.append(row("cli_startup", f"dsv4-agent {label} ÷ bare python", [t / base for t in readers[label]], "x",
                        f"{ref}; median {statistics.median(readers[label]) * 1000:.0f} ms", f"<= {goal:g}", goal))
    slowest = max(SUBCOMMANDS, key=lambda s: statistics.median(helps[s]))
    for sub in SUBCOMMANDS:
        print(f"  dsv4-agent {sub} --help  median {statistics.median(helps[sub]) * 1000:6.1f} ms")
    rows.append(row("cli_startup", f"slowest subcommand --help ({slowest}) ÷ bare python",
                    [t / base for t in helps[slowest]], "x",
                    f"{ref}; median {statistics.median(helps[slowest]) * 1000:.0f} ms", f"<= {HELP_GOAL:g}", HELP_GOAL))
    graph = statistics.median(langgraph)
    rows.append(row("cli_startup", "dsv4-agent replay RUN ÷ the LangGraph import", [t / graph for t in replay], "x",
                    f"import langgraph.graph {graph:.2f} s; replay median {statistics.median(replay):.2f} s"))
    return finish(rows)


if __name__ == "__main__":
    sys.exit(main())
