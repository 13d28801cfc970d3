"""Turn a snapshot of one ledger folder into a ``JobState`` (LocalExecutor and the SSH ledger).

A snapshot is the dict ``remote_ledger._snapshot`` answers: the parsed ledger files ``job``,
``launch``, ``wrapper``, ``exit``, ``command_exit`` (or None), ``stop`` (stop.json exists),
``alive`` (the wrapper process is running), ``job_alive`` (the job's own process group is: its
recorded leader, or members left in it), both checked where the job runs, and ``now`` (that host's
clock, so that clock skew between the agent and the job's host never decides anything).

The process group is the job. A wrapper that died (kill -9) while its job runs on leaves a job
that is *running*, re-attached where it runs and never started again beside it; when the job
ends, its leader's ``command_exit.json`` says how.
"""
from __future__ import annotations

from tools.jobs.spec import JobState

SPAWN_WAIT_S = 5.0
ORPHAN_NOTE = "its wrapper died; the job's own process group runs on and is followed there"


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
    elif snap.get("command_exit") is not None and not snap.get("job_alive"):
        recorded = {**snap["command_exit"], "reason": "stopped" if snap.get("stop") else "exited"}
        with_exit(state, recorded, job)
        state.reason = (state.reason + "; " if state.reason else "") + "its wrapper died, the job's leader recorded the exit"
    elif snap.get("job_alive"):
        state.status, state.reason = "running", ORPHAN_NOTE
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
