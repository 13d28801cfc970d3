"""Split tuning work into (shape x batch size) units and assign them to GPUs, longest first.

SGLang's script gives every GPU all shapes and a slice of the batch sizes, so one GPU ends up
with all the large-M work. Units let the slowest GPU finish close to the others: sort by
estimated cost, give each unit to the GPU that is free earliest (LPT; makespan <= 4/3 of optimal).
"""
from __future__ import annotations

import heapq

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.tuning.shapes import Shape, parse_user_shapes

# SGLang's tuning script's default batch-size list (tuning_block_wise_kernel.py, main()).
DEFAULT_BATCH_SIZES = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096]


class Unit(BaseModel):
    n: int
    k: int
    m: int
    block_n: int = 128
    block_k: int = 128
    cost: float = Field(description="Estimated relative tuning time")

    @property
    def id(self) -> str:
        return f"N{self.n}-K{self.k}-M{self.m}"


def estimate_cost(n: int, k: int, m: int) -> float:
    """Relative tuning time of one unit: a fixed part (compiling each candidate config) plus
    a part growing with the GEMM's work (each candidate is timed over several runs)."""
    return 1.0 + (max(m, 16) * n * k) / float(1 << 30)


def make_units(shapes: list[Shape], batch_sizes: list[int]) -> list[Unit]:
    if not batch_sizes or any(m < 1 for m in batch_sizes):
        raise ToolError(f"batch sizes must be positive integers, got {batch_sizes}")
    return [Unit(n=s.n, k=s.k, m=m, block_n=s.block_n, block_k=s.block_k, cost=estimate_cost(s.n, s.k, m))
            for s in shapes for m in sorted(set(batch_sizes))]


def assign_longest_first(costs: list[float], workers: int) -> list[list[int]]:
    """Indices of ``costs`` per worker: each unit, most expensive first, to the least loaded worker."""
    if workers < 1:
        raise ToolError("no GPU to assign tuning work to; run on a GPU host or let the step plan only")
    order = sorted(range(len(costs)), key=lambda i: (-costs[i], i))
    heap = [(0.0, w) for w in range(workers)]
    buckets: list[list[int]] = [[] for _ in range(workers)]
    for i in order:
        load, w = heapq.heappop(heap)
        buckets[w].append(i)
        heapq.heappush(heap, (load + costs[i], w))
    return buckets


def lower_bound(costs: list[float], workers: int) -> float:
    """No schedule beats the average load, the longest unit, or (pigeonhole: two of the
    workers+1 longest units share a GPU) the sum of the w-th and (w+1)-th longest."""
    ordered = sorted(costs, reverse=True)
    pair = ordered[workers - 1] + ordered[workers] if len(ordered) > workers else 0.0
    return max(sum(costs) / workers, ordered[0] if ordered else 0.0, pair)


class GpuWork(BaseModel):
    gpu: int
    units: list[Unit]
    est_cost: float


class TuningPlan(BaseModel):
    per_gpu: list[GpuWork]
    total_units: int
    makespan: float
    lower_bound: float

    @property
    def ratio(self) -> float:
        return self.makespan / self.lower_bound if self.lower_bound else 1.0


def plan_units(units: list[Unit], gpus: list[int]) -> TuningPlan:
    buckets = assign_longest_first([u.cost for u in units], len(gpus))
    per_gpu = [GpuWork(gpu=g, units=[units[i] for i in b], est_cost=sum(units[i].cost for i in b))
               for g, b in zip(gpus, buckets, strict=True)]
    return TuningPlan(per_gpu=per_gpu, total_units=len(units), makespan=max((w.est_cost for w in per_gpu), default=0.0),
                      lower_bound=lower_bound([u.cost for u in units], len(gpus)))


class PlanTuningArgs(BaseModel):
    """Split FP8 block-GEMM tuning of shapes x batch sizes over GPUs so they finish together."""

    shapes: list[str] = Field(description="Shapes 'N,K' to tune")
    gpus: list[int] = Field(description="GPU indices to use")
    batch_sizes: list[int] = Field(default_factory=lambda: list(DEFAULT_BATCH_SIZES),
                                   description="Batch sizes M to tune each shape for")


def plan_tuning(args: PlanTuningArgs) -> TuningPlan:
    return plan_units(make_units(parse_user_shapes(args.shapes), args.batch_sizes), args.gpus)


PLAN_TUNING = Tool(name="plan_kernel_tuning", args=PlanTuningArgs, run=plan_tuning)
