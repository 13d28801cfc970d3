"""search() vs raw `rg` on the same queries over the unpacked sglang wheel; prints medians and the ratio (goal <= 1.2)."""
from __future__ import annotations

import statistics
import subprocess
import time

from tools.search import SearchArgs, find_rg, search
from tools.sglang_source import ensure_wheel_source

QUERIES = ["speculative_eagle_topk", r"def \w+_hook", "DeepseekV4ForCausalLM", r"--speculative-[a-z-]+"]
ROUNDS = 7


def main() -> None:
    root = str(ensure_wheel_source("0.5.23"))
    rg = find_rg()
    assert rg, "rg not found: install the ripgrep wheel"
    ours, raw = [], []
    for _ in range(ROUNDS):
        for query in QUERIES:
            start = time.perf_counter()
            search(SearchArgs(pattern=query, root=root, max_hits=5000))
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            subprocess.run([rg, "--json", "-e", query, "--", "."], cwd=root, capture_output=True)
            raw.append(time.perf_counter() - start)
    a, b = statistics.median(ours), statistics.median(raw)
    print(f"search median {a * 1000:.1f} ms, raw rg median {b * 1000:.1f} ms, ratio {a / b:.2f} (goal <= 1.2)")


if __name__ == "__main__":
    main()
