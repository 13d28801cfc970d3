"""search() vs raw `rg` on the same queries over the unpacked sglang wheel; prints medians and ratios (goal <= 1.2).

Two references, timed in the same rounds so machine load shows in all three: the exact argv that
search() runs (`rg_command`), captured raw — the ratio is then purely our Python overhead — and the
plain `rg --json` pass this benchmark used to compare against (kept so numbers stay comparable).
A second part times a cut (max_hits=50 on a flood query), where hits are re-collected in path order.
"""
from __future__ import annotations

import statistics
import subprocess
import time

from tools.source.search import SearchArgs, find_rg, rg_command, search
from tools.source.resolve import ensure_wheel_source

QUERIES = ["speculative_eagle_topk", r"def \w+_hook", "DeepseekV4ForCausalLM", r"--speculative-[a-z-]+"]
ROUNDS = 9


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    root = str(ensure_wheel_source("0.5.23"))
    rg = find_rg()
    assert rg, "rg not found: install the ripgrep wheel"
    ours, same_argv, json_ref, cut, cut_ref = [], [], [], [], []
    for _ in range(ROUNDS):
        for query in QUERIES:
            args = SearchArgs(pattern=query, root=root, max_hits=5000)
            ours.append(_timed(lambda: search(args)))
            same_argv.append(_timed(lambda: subprocess.run(rg_command(args, rg), cwd=root, capture_output=True)))
            json_ref.append(_timed(lambda: subprocess.run([rg, "--json", "-e", query, "--", "."], cwd=root,
                                                          capture_output=True)))
        flood = SearchArgs(pattern="import", root=root, max_hits=50)
        cut.append(_timed(lambda: search(flood)))
        cut_ref.append(_timed(lambda: subprocess.run(rg_command(flood, rg), cwd=root, capture_output=True)))
    a, b, c = (statistics.median(x) for x in (ours, same_argv, json_ref))
    d, e = statistics.median(cut), statistics.median(cut_ref)
    print(f"search median {a * 1000:.1f} ms; raw rg, same argv, median {b * 1000:.1f} ms, ratio {a / b:.2f} "
          f"(goal <= 1.2); raw rg --json median {c * 1000:.1f} ms, ratio {a / c:.2f}")
    print(f"cut of a flood ('import', max_hits=50) median {d * 1000:.1f} ms; raw rg of all its hits "
          f"median {e * 1000:.1f} ms, ratio {d / e:.2f}")


if __name__ == "__main__":
    main()
