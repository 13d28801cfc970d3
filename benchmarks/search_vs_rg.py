"""Evidence search ÷ raw `rg` over the unpacked sglang 0.5.23 wheel, for every query shape.

Shapes: a rare literal, regexes, thousands of hits returned whole, the default 200-hit cut and a
50-hit and a 5,000-hit cut of a flood (the first hits in path order, whatever order rg's parallel walk found
them in), and a file listing. The reference, timed in the same rounds so that load shows in both:
`rg` itself with the same pattern and options over the same tree, printing every hit (what a
user would type to get the same answer), output read by the benchmark. Goal: the median ratio
<= 1.2 for every shape.

    .venv/bin/python benchmarks/search_vs_rg.py [--rounds 9]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import finish, row  # noqa: E402
from tools.source.resolve import ensure_wheel_source  # noqa: E402
from tools.source.search import SearchArgs, find_rg, rg_command, search  # noqa: E402

GOAL = 1.2
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


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    rounds = parser.parse_args().rounds
    root = str(ensure_wheel_source("0.5.23"))
    rg = find_rg()
    assert rg, "rg not found: install the ripgrep wheel"
    ratios: dict[str, list[float]] = {label: [] for label, *_ in SHAPES}
    refs: dict[str, list[float]] = {label: [] for label, *_ in SHAPES}
    for _ in range(rounds):
        for label, pattern, max_hits, files_only in SHAPES:
            args = SearchArgs(pattern=pattern, root=root, max_hits=max_hits, files_only=files_only)
            full = rg_command(args, rg)
            ours = timed(lambda a=args: search(a))
            ref = timed(lambda c=full: subprocess.run(c, cwd=root, capture_output=True))
            ratios[label].append(ours / ref)
            refs[label].append(ref)
    rows = []
    for label, *_ in SHAPES:
        ref = f"rg {sorted(refs[label])[len(refs[label]) // 2] * 1000:.0f} ms"
        rows.append(row("search_vs_rg", f"search ÷ rg: {label}", ratios[label], "x", ref, f"<= {GOAL}", GOAL))
    return finish(rows)


if __name__ == "__main__":
    sys.exit(main())
