"""How fast the commands a user runs to look answer, as whole processes beside `python -c pass`.

    .venv/bin/python benchmarks/cli_startup.py [--runs 11]

Each round times a bare interpreter start (`python -c pass`, the reference) and then, once each,
`dsv4-agent --version`, `-h`, the read-only commands on a recorded run (`status`, `jobs`, `runs`;
the committed golden run, copied to a scratch folder), `replay` of that run with and without
`--timeline`, and every command's `--help`, so that load on the machine shows in all of them
alike. Goals, as the median of each ÷ the reference's median: `--version` and `-h` <= 3, `status`,
`jobs`, `runs` and the slowest command's `--help` <= 5. `replay` re-drives the recorded campaign
through its LangGraph graph, whose import alone is tens of bare starts: it is shown ÷ a bare
start without a goal, and held ÷ the LangGraph import (`python -c "import langgraph.graph"`) and,
with `--timeline` (which draws with matplotlib), ÷ the import of both, <= 1.5 each
(benchmarks/replay_speed.py holds how replay grows with the record).
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.commands.command_table import HELP_PATHS  # noqa: E402
from benchmarks.harness import AGENT, REPO, clean_env, finish, row, time_process  # noqa: E402

GOLDEN = REPO / "tests" / "golden" / "playbook-mtp-tune"
RUN = GOLDEN.name
SUBCOMMANDS = sorted(" ".join(path) for path in HELP_PATHS if path)  # every command of the tool
# (label, argv after dsv4-agent, goal as a multiple of a bare interpreter start)
READERS = [("--version", ["--version"], 3.0), ("-h", ["-h"], 3.0), ("status RUN", ["status", RUN], 5.0),
           ("jobs RUN", ["jobs", RUN], 5.0), ("runs", ["runs"], 5.0)]
HELP_GOAL = 5.0
REPLAY_GOAL = 1.5  # ÷ the import of what replay cannot do without
LANGGRAPH = [sys.executable, "-c", "import langgraph.graph"]
LANGGRAPH_AND_PLOTS = [sys.executable, "-c", "import langgraph.graph, matplotlib.figure"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=11)
    runs = parser.parse_args().runs
    env = clean_env()
    bare: list[float] = []
    langgraph: list[float] = []
    plots: list[float] = []
    readers: dict[str, list[float]] = {label: [] for label, _a, _g in READERS}
    replay: list[float] = []
    timeline: list[float] = []
    helps: dict[str, list[float]] = {sub: [] for sub in SUBCOMMANDS}
    with tempfile.TemporaryDirectory(prefix="dsv4-bench-cli-") as tmp:
        work = Path(tmp)
        shutil.copytree(GOLDEN, work / "runs" / RUN)
        for _ in range(runs):
            bare.append(time_process([sys.executable, "-c", "pass"], env=env))
            for label, argv, _goal in READERS:
                readers[label].append(time_process([AGENT, *argv], cwd=work, env=env))
            langgraph.append(time_process(LANGGRAPH, env=env))
            replay.append(time_process([AGENT, "replay", RUN], cwd=work, env=env))
            plots.append(time_process(LANGGRAPH_AND_PLOTS, env=env))
            timeline.append(time_process([AGENT, "replay", "--timeline", RUN], cwd=work, env=env))
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
    rows.append(row("cli_startup", "dsv4-agent replay RUN ÷ bare python", [t / base for t in replay], "x",
                    f"{ref}; replay median {statistics.median(replay):.2f} s"))
    graph, both = statistics.median(langgraph), statistics.median(plots)
    rows.append(row("cli_startup", "dsv4-agent replay RUN ÷ the LangGraph import", [t / graph for t in replay], "x",
                    f"import langgraph.graph {graph:.2f} s; replay median {statistics.median(replay):.2f} s",
                    f"<= {REPLAY_GOAL:g}", REPLAY_GOAL))
    rows.append(row("cli_startup", "replay --timeline RUN ÷ LangGraph + matplotlib import", [t / both for t in timeline],
                    "x", f"import langgraph.graph, matplotlib.figure {both:.2f} s; --timeline median "
                    f"{statistics.median(timeline):.2f} s", f"<= {REPLAY_GOAL:g}", REPLAY_GOAL))
    return finish(rows)


if __name__ == "__main__":
    sys.exit(main())
