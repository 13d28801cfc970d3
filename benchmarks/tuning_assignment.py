"""Makespan of the tuning assignment / a lower bound on the optimum (goal: <= 1.10).

Unit costs are synthetic: the step's own cost model (tools.tuning.plan.estimate_cost) for real
shape lists (DeepSeek-V3 at TP8 and a DeepSeek-V4 config at TP4/TP8, from config.json derivation)
times SGLang's default batch sizes, plus random cost sets. Reference measured in the same
process on the same costs: SGLang's own split (each GPU gets every shape and a round-robin slice
of the batch sizes). Prints the median ratio over cases for both.

    .venv/bin/python benchmarks/tuning_assignment.py
"""
from __future__ import annotations

import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.tuning_fixtures import V3_CONFIG, V4_FLASH_LIKE  # noqa: E402
from tools.tuning.plan import DEFAULT_BATCH_SIZES, assign_longest_first, lower_bound, make_units  # noqa: E402
from tools.tuning.shapes import derive_from_config  # noqa: E402


def sglang_split(units, gpus: int) -> float:
    """SGLang's script: batch sizes dealt round-robin to GPUs, each GPU tunes all shapes."""
    ms = sorted({u.m for u in units})
    loads = [0.0] * gpus
    for i, m in enumerate(ms):
        loads[i % gpus] += sum(u.cost for u in units if u.m == m)
    return max(loads)


def ratios(units, gpus: int) -> tuple[float, float]:
    costs = [u.cost for u in units]
    buckets = assign_longest_first(costs, gpus)
    ours = max(sum(costs[i] for i in b) for b in buckets)
    bound = lower_bound(costs, gpus)
    return ours / bound, sglang_split(units, gpus) / bound


def main() -> None:
    cases = []
    for config, tp in ((V3_CONFIG, 8), (V4_FLASH_LIKE, 4), (V4_FLASH_LIKE, 8)):
        shapes, _ = derive_from_config(config, tp)
        for gpus in (2, 4, 8):
            cases.append((f"{config['architectures'][0]} TP{tp} on {gpus} GPUs", make_units(shapes, DEFAULT_BATCH_SIZES), gpus))
    rng = random.Random(4)
    for i in range(20):
        shapes, _ = derive_from_config(V3_CONFIG, 8)
        picked = rng.sample(shapes, rng.randint(2, len(shapes)))
        ms = sorted(rng.sample(DEFAULT_BATCH_SIZES, rng.randint(4, len(DEFAULT_BATCH_SIZES))))
        cases.append((f"random subset {i}", make_units(picked, ms), rng.choice([2, 4, 8])))
    ours, theirs = [], []
    for name, units, gpus in cases:
        a, b = ratios(units, gpus)
        ours.append(a)
        theirs.append(b)
        print(f"{name:44s} units={len(units):4d}  longest-first {a:.3f}   sglang split {b:.3f}")
    print(f"\nmedian makespan/lower bound: longest-first {statistics.median(ours):.3f} "
          f"(max {max(ours):.3f}); SGLang's split {statistics.median(theirs):.3f} (max {max(theirs):.3f}); "
          f"goal <= 1.10: {'met' if max(ours) <= 1.10 else 'NOT met'}")


if __name__ == "__main__":
    main()
