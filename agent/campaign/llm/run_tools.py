"""Tools bound to this run: job status and logs from the run's own executor ledger.

The model names a job key; which ledger is read is fixed by the agent (the run's executor),
never by the model. Logs are capped from the end and come back as untrusted data.
"""
from __future__ import annotations

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError, cap_text
from tools.jobs import Executor


class JobStatusArgs(BaseModel):
    """List this run's background jobs (tuning, servers, benchmarks) and their states."""

    only_running: bool = Field(False, description="Only jobs that have not finished")


class JobStatusResult(BaseModel):
    jobs: list[dict] = Field(description="key, status, kind, lane, exit_code, reason per job")


class JobLogArgs(BaseModel):
    """Read the end of one of this run's job logs."""

    key: str = Field(description="Job key as listed by job_status, e.g. 'tune-gpu0'")
    max_chars: int = Field(4000, ge=200, le=20000, description="Characters from the end of the log")


class JobLogResult(BaseModel):
    key: str
    log: str
    note: str = Field("", description="What was cut; empty when the whole log is shown")


def make_run_tools(executor: Executor) -> list[Tool]:
    def job_status(args: JobStatusArgs) -> JobStatusResult:
        states = [s for s in executor.jobs() if not (args.only_running and s.ended_at)]
        return JobStatusResult(jobs=[s.model_dump(include={"key", "status", "kind", "lane", "exit_code", "reason"})
                                     for s in states])

    def job_log(args: JobLogArgs) -> JobLogResult:
        known = {s.key for s in executor.jobs()}
        if args.key not in known:
            raise ToolError(f"no job {args.key!r} in this run; call job_status for the keys "
                            f"({', '.join(sorted(known)[:20]) or 'no jobs yet'})")
        capped = cap_text(executor.read_log(args.key, max_chars=args.max_chars + 1), args.max_chars)
        return JobLogResult(key=args.key, log=capped.text, note=capped.note)

    return [Tool(name="job_status", args=JobStatusArgs, run=job_status),
            Tool(name="job_log", args=JobLogArgs, run=job_log)]
