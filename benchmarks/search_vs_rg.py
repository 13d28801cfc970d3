"""Evidence search ÷ raw `rg` over the unpacked sglang 0.5.23 wheel, for every query shape.

Shapes: a rare literal, regexes, thousands of hits returned whole, the default 200-hit cut and a
50-hit and a 5,000-hit cut of a flood (the first hits in path order, whatever order rg's parallel walk found
them in), and a file listing. The reference, timed in the same rounds so that load shows in both:
`rg` itself with the same pattern and options over the same tree, printing every hit (what a
user would type to get the same answer), output read by the benchmark. Within a round the two run
back to back, in turn first (so a burst of load on a shared machine, or a warmer cache for the
second, favours neither); the ratio is taken per round and the median of the rounds kept. Goal:
that median <= 1.2 for every shape.

For a cut flood a second figure, without a goal: search ÷ `rg --sort path ... | head -n N`, rg
walking in path order and stopped at the cut (the same hits as the search returns, at the least
cost rg alone has for them). The search cannot know a query floods before it does, so it pays a
parallel walk as far as the cut before that one: this figure says what that costs.

    .venv/bin/python benchmarks/search_vs_rg.py [--rounds 21]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import finish, row  # noqa: E402
from tools.source.resolve import ensure_wheel_source  # noqa: E402
from tools.source.search import SearchArgs, find_rg, rg_command, search  # noqa: E402

GOAL = 1.2
ROUNDS = 21
# (label, pattern, max_hits, files_only)
SHAPES = [
    ("rare literal", "speculative_eagle_topk", 5000, False),
    ("regex over definitions", r"def \w+_hook", 5000, False),
    ("flag regex", r"--speculative-[a-z-]+", 5000, False),
    ("2,977 hits, returned whole", "def forward", 5000, False),
    ("3,679 hits, returned whole", "speculative", 5000, False),
    ("flood cut at the default 200", "import", 200, False),
    ("flood cut at 50", "self", 50, False),
    ("flood cut at 5,000", "self", 5000, False),
    ("files only", "speculative", 5000, True),
]
CUTS = {"flood cut at the default 200", "flood cut at 50", "flood cut at 5,000"}


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def in_turn(n: int, ours, reference) -> tuple[float, float]:
    """Seconds of ``ours`` and of ``reference``, run back to back: ours first in even rounds."""
    if n % 2:
        ref = timed(reference)
        return timed(ours), ref
    mine = timed(ours)
    return mine, timed(reference)


def rg_to_the_cut(cmd: list[str], root: str, hits: int) -> None:
    """`cmd | head -n hits`: rg's output read until ``hits`` lines came, then rg stopped."""
    with subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        seen = 0
        while chunk := proc.stdout.read1(1 << 16):
            seen += chunk.count(b"\n")
            if seen >= hits:
                proc.kill()
                break


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    rounds = parser.parse_args().rounds
    root = str(ensure_wheel_source("0.5.23"))
    rg = find_rg()
    if not rg:
        raise SystemExit("rg not found: install the ripgrep wheel (pip install -e '.[test]')")
    ratios: dict[str, list[float]] = {label: [] for label, *_ in SHAPES}
    refs: dict[str, list[float]] = {label: [] for label, *_ in SHAPES}
    to_cut: dict[str, list[float]] = {label: [] for label in CUTS}
    for n in range(rounds):
        for label, pattern, max_hits, files_only in SHAPES:
            args = SearchArgs(pattern=pattern, root=root, max_hits=max_hits, files_only=files_only)
            full = rg_command(args, rg)
            ref_run = lambda c=full: subprocess.run(c, cwd=root, capture_output=True)  # noqa: E731
            ours_run = lambda a=args: search(a)  # noqa: E731
            ours, ref = in_turn(n, ours_run, ref_run)
            ratios[label].append(ours / ref)
            refs[label].append(ref)
            if label in CUTS:  # its own pair, in turn first as well
                cut_run = lambda c=rg_command(args, rg, in_path_order=True), h=max_hits: rg_to_the_cut(c, root, h)  # noqa: E731
                mine, stopped = in_turn(n, ours_run, cut_run)
                to_cut[label].append(mine / stopped)
    rows = []
    for label, _pattern, max_hits, _files in SHAPES:
        ref = f"rg {statistics.median(refs[label]) * 1000:.0f} ms"
        rows.append(row("search_vs_rg", f"search ÷ rg: {label}", ratios[label], "x", ref, f"<= {GOAL}", GOAL))
        if label in CUTS:
            rows.append(row("search_vs_rg", f"  ÷ rg --sort path | head -n {max_hits}", to_cut[label], "x",
                            "the same hits, rg stopped at the cut"))
    return finish(rows)


if __name__ == "__main__":
    sys.exit(main())
