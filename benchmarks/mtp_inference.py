"""Full `mtp` inference for DeepSeek-V4-Flash over the whole sglang wheel; prints medians (goal < 2 s, cold).

Cold = a fresh process's first inference: the parsed-tree cache (tools/source/pysource.py) and the model
class cache are cleared before each cold round. Warm = the same inference again in the process
(what a campaign's sync step or a second question pays). References measured in the same process
and rounds, so a loaded machine shows in both: one raw `rg -l speculative` pass over the tree (the
floor of any search), and a plain `ast.parse` of exactly the files the inference parsed (the floor
of any AST-based reading; parsed with the cyclic GC paused, as the inference does). Ratios are inference / reference.
"""
from __future__ import annotations

import ast
import statistics
import subprocess
import time

from tools.source import pysource
from tools.mtp.infer import InferMtpArgs, infer_mtp
from tools.mtp.arch import model_classes
from tools.source.search import find_rg
from tools.source.resolve import ensure_wheel_source

ROUNDS = 5


def main() -> None:
    root = ensure_wheel_source("0.5.23")
    args = InferMtpArgs(sglang=str(root), model="deepseek-ai/DeepSeek-V4-Flash")
    cold, warm, rg_floor, parse_floor = [], [], [], []
    for _ in range(ROUNDS):
        model_classes.cache_clear()
        pysource.clear_cache()
        start = time.perf_counter()
        answer = infer_mtp(args)
        cold.append(time.perf_counter() - start)
        assert answer.recommended is not None
        texts = pysource.cached_texts()
        model_classes.cache_clear()
        start = time.perf_counter()
        infer_mtp(args)
        warm.append(time.perf_counter() - start)
        start = time.perf_counter()
        subprocess.run([find_rg() or "rg", "-l", "speculative", "--", "."], cwd=root, capture_output=True)
        rg_floor.append(time.perf_counter() - start)
        start = time.perf_counter()
        with pysource.gc_paused():  # the floor: no collector passes over the trees the cache holds
            for text in texts:
                ast.parse(text)
        parse_floor.append(time.perf_counter() - start)
    a, w = statistics.median(cold), statistics.median(warm)
    r, p = statistics.median(rg_floor), statistics.median(parse_floor)
    print(f"mtp inference median cold {a:.2f} s (goal < 2 s), warm {w:.2f} s; "
          f"raw rg -l median {r:.3f} s (cold ratio {a / r:.1f}); "
          f"plain ast.parse of the {len(texts)} files read median {p:.2f} s (cold ratio {a / p:.2f})")


if __name__ == "__main__":
    main()
