"""Run one tuning job per GPU through an executor, block until all end, retry a failed job.

An executor with ``capabilities.job_arrays`` (Slurm) gets the first attempts as one job array. Every
launch goes through the executor's ledger, so a call after the agent died re-attaches to running jobs
and finds finished ones. Each attempt has its own key (``tune-gpu0``, ``tune-gpu0-a2``, ...): a failed
or lost one is retried once per run of the agent and again by ``resume`` up to the attempt limit, and
the per-GPU driver skips units already saved.
"""
from __future__ import annotations

import time
from typing import Callable

from pydantic import BaseModel, Field

from tools.jobs import Executor, JobSpec, JobState
from tools.jobs.attempts import next_attempt
from tools.jobs.exit_wait import ExitStamp, exit_stamp, sleep_until_an_exit
from tools.tuning.progress import parse_progress

EventSink = Callable[[str, dict], None]  # (trace event type, data)
_LOG_TAIL = 200_000  # enough log to see every unit line of a long job


class FanoutJob(BaseModel):
    gpu: int
    key: str
    argv: list[str]
    cwd: str
    unit_ids: list[str]
    units_by_shape: dict[str, list[int]] = Field(description="'N,K' -> Ms this job tunes")
    env: dict[str, str] = Field(default_factory=dict)

    def identity(self) -> dict:
        """What the job is across attempts: the GPU and the units it tunes (paths are attributes)."""
        return {"tune": "fp8-block-gemm", "gpu": self.gpu, "units": sorted(self.unit_ids)}

    def shape_map(self) -> dict[tuple[int, int], list[int]]:
        return {tuple(int(p) for p in key.split(",")): ms for key, ms in self.units_by_shape.items()}


class FanoutJobResult(BaseModel):
    gpu: int
    keys: list[str] = Field(description="Job keys used, first attempt first")
    status: str
    reason: str = ""
    done_units: list[str]
    attached: bool = False


class FanoutResult(BaseModel):
    jobs: list[FanoutJobResult]
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return all(j.status == "succeeded" for j in self.jobs)


def _spec(job: FanoutJob, key: str, timeout_s: float | None) -> JobSpec:
    return JobSpec(key=key, argv=job.argv, kind="tune", lane="gpu", cwd=job.cwd, env=job.env, gpus=[job.gpu],
                   timeout_s=timeout_s, identity=job.identity())


class _Chain:
    """One GPU's job across its attempts in this drive."""

    def __init__(self, job: FanoutJob):
        self.job = job
        self.key = job.key
        self.keys: list[str] = []
        self.launched_here = 0          # attempts started by this drive (retries are bounded per drive too)
        self.attached: bool | None = None
        self.done_units: set[str] = set()
        self.result: FanoutJobResult | None = None

    def finish(self, status: str, reason: str) -> None:
        self.result = FanoutJobResult(gpu=self.job.gpu, keys=self.keys, status=status, reason=reason,
                                      done_units=sorted(self.done_units), attached=bool(self.attached))


def _start(executor: Executor, chain: _Chain, emit: EventSink, timeout_s: float | None, retries: int,
           first: JobState | None = None) -> None:
    """Launch or re-attach the chain's current attempt, or finish the chain when there is none to run."""
    attempt = next_attempt(executor, chain.job.key, chain.job.identity())
    chain.keys = [s.key for s in attempt.earlier] + [attempt.key]
    if attempt.verdict == "give_up":
        state = executor.poll(attempt.key)
        chain.finish(state.status, f"{state.reason}; {attempt.reason}".strip("; "))
        return
    if attempt.verdict == "launch" and chain.launched_here > retries:
        last = attempt.retry_of
        chain.keys.pop()
        chain.finish(last.status if last else "failed", (last.reason if last else "") + "; retried once in this "
                     "run of the agent: `dsv4-agent resume RUN` tries again, finished units are kept")
        return
    chain.key = attempt.key
    state = first if first is not None and first.key == attempt.key else \
        executor.launch(_spec(chain.job, attempt.key, timeout_s))
    chain.launched_here += not state.attached
    chain.attached = state.attached if chain.attached is None else chain.attached
    emit("job_launched", {"key": attempt.key, "gpu": chain.job.gpu, "attached": state.attached,
                          "status": state.status, "units": len(chain.job.unit_ids), "kind": "tune",
                          "attempt": attempt.number, **({"retry_of": attempt.retry_of.key} if attempt.retry_of else {})})
    if attempt.reason:
        emit("progress", {"message": f"GPU {chain.job.gpu}: {attempt.key} {attempt.reason}; finished units are kept",
                          "key": attempt.key, "gpu": chain.job.gpu})


def _first_attempts(executor: Executor, jobs: list[FanoutJob], timeout_s: float | None) -> dict[str, JobState]:
    """Slurm (``capabilities.job_arrays``): every GPU's first attempt as ONE job array; others launch one by one."""
    if not executor.capabilities.job_arrays:
        return {}
    fresh = [j for j in jobs if (a := next_attempt(executor, j.key, j.identity())).verdict == "launch" and a.number == 1]
    if not fresh:
        return {}
    return {s.key: s for s in executor.launch_array([_spec(j, j.key, timeout_s) for j in fresh])}


def run_fanout(executor: Executor, jobs: list[FanoutJob], emit: EventSink, poll_s: float = 1.0,
               retries: int = 1, timeout_s: float | None = None) -> FanoutResult:
    start = time.monotonic()
    chains = [_Chain(job) for job in jobs]
    first = _first_attempts(executor, jobs, timeout_s)
    for chain in chains:
        _start(executor, chain, emit, timeout_s, retries, first.get(chain.job.key))
    last_status: dict[str, str] = {}
    while any(c.result is None for c in chains):
        seen: dict[str, ExitStamp] = {}
        for chain in [c for c in chains if c.result is None]:
            job, key = chain.job, chain.key
            seen[key] = exit_stamp(executor, key)
            state = executor.poll(key)
            progress = parse_progress(executor.read_log(key, _LOG_TAIL), job.shape_map())
            new = set(progress.done_units) - chain.done_units
            if new:
                chain.done_units |= new
                emit("progress", {"message": f"GPU {job.gpu}: {len(chain.done_units)}/{len(job.unit_ids)} units tuned",
                                  "key": key, "gpu": job.gpu, "done": len(chain.done_units),
                                  "total": len(job.unit_ids), "bar": progress.bar})
            if last_status.get(key) != state.status:
                last_status[key] = state.status
                emit("job_state", {"key": key, "gpu": job.gpu, "status": state.status, "reason": state.reason})
            if not state.done:
                continue
            emit("job_finished", {"key": key, "gpu": job.gpu, "status": state.status, "reason": state.reason,
                                  "exit_code": state.exit_code})
            if state.status == "succeeded":
                chain.finish("succeeded", "")
            else:
                _start(executor, chain, emit, timeout_s, retries)  # a retry, or the end of the chain
        waiting = {c.key: seen[c.key] if c.key in seen else exit_stamp(executor, c.key)  # a retry started now
                   for c in chains if c.result is None}
        if waiting:
            sleep_until_an_exit(executor, waiting, poll_s)
    return FanoutResult(jobs=[c.result for c in chains], elapsed_s=time.monotonic() - start)
