"""Full `mtp` inference for DeepSeek-V4-Flash over the whole sglang wheel; prints the median (goal < 2 s).

Reference in the same process: one raw `rg` pass over the tree for "speculative" (the floor of any search).
"""
from __future__ import annotations

import statistics
import subprocess
import time

from tools.mtp import InferMtpArgs, infer_mtp
from tools.mtp_arch import model_classes
from tools.search import find_rg
from tools.sglang_source import ensure_wheel_source

ROUNDS = 5


def main() -> None:
    root = ensure_wheel_source("0.5.23")
    times, floor = [], []
    for _ in range(ROUNDS):
        model_classes.cache_clear()  # no warm cache between rounds
        start = time.perf_counter()
        answer = infer_mtp(InferMtpArgs(sglang=str(root), model="deepseek-ai/DeepSeek-V4-Flash"))
        times.append(time.perf_counter() - start)
        assert answer.recommended is not None
        start = time.perf_counter()
        subprocess.run([find_rg() or "rg", "-l", "speculative", "--", "."], cwd=root, capture_output=True)
        floor.append(time.perf_counter() - start)
    a, b = statistics.median(times), statistics.median(floor)
    print(f"mtp inference median {a:.2f} s (goal < 2 s); raw rg -l median {b:.3f} s; ratio {a / b:.1f}")


if __name__ == "__main__":
    main()
