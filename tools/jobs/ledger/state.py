"""Turn a snapshot of one ledger folder into a ``JobState`` (shared by the remote executors).

A snapshot is the dict ``remote_ledger._snapshot`` answers: the parsed ledger files ``job``,
``launch``, ``wrapper``, ``exit`` (or None), ``stop`` (stop.json exists), ``alive`` (the wrapper
process is running, checked where it runs) and ``now`` (that host's clock, so that clock skew
between the agent and the job's host never decides anything). The rules match LocalExecutor's.
"""
from __future__ import annotations

from tools.jobs.spec import JobState

SPAWN_WAIT_S = 5.0


def state_from_snapshot(key: str, snap: dict, log_path: str) -> JobState:
    job = snap.get("job") or {}
    launch = snap.get("launch") or {}
    wrapper = snap.get("wrapper") or {}
    state = JobState(
        key=key, status="launching", kind=job.get("kind", "other"), lane=job.get("lane", "gpu"),
        gpus=job.get("gpus"), pid=launch.get("pid") or wrapper.get("pid"),
        child_pgid=wrapper.get("child_pgid"), launched_at=launch.get("launched_at"),
        log_path=log_path,
    )
    ended = snap.get("exit")
    if ended is not None:
        return with_exit(state, ended, job)
    if snap.get("alive"):
        state.status = "running"
    elif snap.get("stop"):
        state.status, state.reason = "stopped", "stopped (process group killed)"
    elif launch or wrapper:
        state.status, state.reason = "lost", "the job's wrapper died without recording an exit"
    elif snap.get("now", 0) - job.get("intent_at", 0) > SPAWN_WAIT_S:
        state.status, state.reason = "lost", "launch intent recorded but the job never started"
    return state


def with_exit(state: JobState, ended: dict, job: dict) -> JobState:
    """Fill in how the job ended from its exit.json (written by wrapper.py)."""
    state.exit_code = ended.get("exit_code")
    state.ended_at = ended.get("ended_at")
    reason = ended.get("reason", "exited")
    if reason == "exited":
        state.status = "succeeded" if state.exit_code == 0 else "failed"
        state.reason = "" if state.exit_code == 0 else f"exit code {state.exit_code}"
    else:
        state.status = reason
        timeout = job.get("timeout_s")
        state.reason = reason.replace("_", " ") + (f" after {timeout:g} s" if reason == "timed_out" and timeout else "")
    return state
