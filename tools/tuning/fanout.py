"""Run one tuning job per GPU through an executor, block until all end, retry a failed job once.

An executor that offers ``launch_array`` (Slurm) gets the first attempts as one job array.
Idempotent by construction: every launch goes through the executor's ledger, so calling this
again after the agent died re-attaches to running jobs and finds finished ones finished; a
failed job's retry has its own key (``<key>-retry1``) and is re-attached the same way. Retries
skip finished units because the per-GPU driver skips units already in its save path.
"""
from __future__ import annotations

import time
from typing import Callable

from pydantic import BaseModel, Field

from tools.jobs import Executor, JobSpec, JobState
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
                   timeout_s=timeout_s)


def _sleep_until_an_exit(executor: Executor, keys: list[str], poll_s: float) -> None:
    """Sleep up to ``poll_s``, waking early when a running job's exit record appears.

    A stat per job every 50 ms costs next to nothing, and the GPU lane then moves on within
    ~50 ms of a job ending instead of up to a whole poll interval later. (Remote executors copy
    exit records back only when polled, so for them this is a plain sleep.)
    """
    deadline = time.monotonic() + poll_s
    while time.monotonic() < deadline:
        if any((executor.job_dir(key) / "exit.json").exists() for key in keys):
            return
        time.sleep(0.05)


def run_fanout(executor: Executor, jobs: list[FanoutJob], emit: EventSink, poll_s: float = 1.0,
               retries: int = 1, timeout_s: float | None = None) -> FanoutResult:
    start = time.monotonic()
    attempt = {j.key: 0 for j in jobs}
    current: dict[str, JobState] = {}
    done_units: dict[str, set[str]] = {j.key: set() for j in jobs}
    attached: dict[str, bool] = {}
    last_status: dict[str, str] = {}

    def key_of(job: FanoutJob) -> str:
        return job.key if attempt[job.key] == 0 else f"{job.key}-retry{attempt[job.key]}"

    def launched(job: FanoutJob, key: str, state: JobState) -> None:
        current[job.key] = state
        attached.setdefault(job.key, state.attached)
        emit("job_launched", {"key": key, "gpu": job.gpu, "attached": state.attached, "status": state.status,
                              "units": len(job.unit_ids), "kind": "tune"})

    def launch(job: FanoutJob) -> None:
        key = key_of(job)
        launched(job, key, executor.launch(_spec(job, key, timeout_s)))

    launch_array = getattr(executor, "launch_array", None)  # Slurm: the first attempts as ONE job array
    if launch_array is not None and jobs:
        for job, state in zip(jobs, launch_array([_spec(j, j.key, timeout_s) for j in jobs])):
            launched(job, job.key, state)
    for job in jobs:
        if launch_array is None:
            launch(job)
        # A re-run after a crash: follow an existing retry chain instead of judging attempt 0 again.
        while current[job.key].status in ("failed", "lost", "timed_out") and attempt[job.key] < retries \
                and (executor.job_dir(f"{job.key}-retry{attempt[job.key] + 1}") / "job.json").exists():
            attempt[job.key] += 1
            launch(job)

    finished: dict[str, FanoutJobResult] = {}
    while len(finished) < len(jobs):
        for job in jobs:
            if job.key in finished:
                continue
            key = key_of(job)
            state = executor.poll(key)
            current[job.key] = state
            log = executor.read_log(key, _LOG_TAIL)
            progress = parse_progress(log, job.shape_map())
            new = set(progress.done_units) - done_units[job.key]
            if new:
                done_units[job.key] |= new
                emit("progress", {"message": f"GPU {job.gpu}: {len(done_units[job.key])}/{len(job.unit_ids)} units tuned",
                                  "key": key, "gpu": job.gpu, "done": len(done_units[job.key]),
                                  "total": len(job.unit_ids), "bar": progress.bar})
            if last_status.get(key) != state.status:
                last_status[key] = state.status
                emit("job_state", {"key": key, "gpu": job.gpu, "status": state.status, "reason": state.reason})
            if not state.done:
                continue
            emit("job_finished", {"key": key, "gpu": job.gpu, "status": state.status, "reason": state.reason,
                                  "exit_code": state.exit_code})
            if state.status != "succeeded" and state.status != "stopped" and attempt[job.key] < retries:
                attempt[job.key] += 1
                emit("progress", {"message": f"GPU {job.gpu}: {key} {state.status} ({state.reason}); retrying once, "
                                             "finished units are kept", "key": key, "gpu": job.gpu})
                launch(job)
                continue
            finished[job.key] = FanoutJobResult(
                gpu=job.gpu, keys=[job.key] + [f"{job.key}-retry{i}" for i in range(1, attempt[job.key] + 1)],
                status=state.status, reason=state.reason, done_units=sorted(done_units[job.key]),
                attached=attached.get(job.key, False))
        if len(finished) < len(jobs):
            _sleep_until_an_exit(executor, [key_of(j) for j in jobs if j.key not in finished], poll_s)
    return FanoutResult(jobs=[finished[j.key] for j in jobs], elapsed_s=time.monotonic() - start)
