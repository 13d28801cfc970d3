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

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.jobs.spec import JobState

SPAWN_WAIT_S = 5.0
COPY_NOTE = "runs for another run folder, of which this is a copy: not this run's to follow or stop"
ORPHAN_NOTE = "its wrapper died; the job's own process group runs on and is followed there"


def state_from_snapshot(key: str, snap: dict, log_path: str) -> JobState:
    return job_state(state_fields(key, snap, log_path))


def job_state(fields: dict) -> JobState:
    """The ``JobState`` of ``state_fields``' answer."""
    from tools.jobs.spec import JobState

    # how it ended is assigned, not validated: an exit.json with an odd reason still reads back as it says
    state = JobState(**{name: value for name, value in fields.items() if name not in _ENDING}, status="launching")
    for name in _ENDING:
        setattr(state, name, fields[name])
    return state


_ENDING = ("status", "ended_at", "exit_code", "reason")


def state_fields(key: str, snap: dict, log_path: str) -> dict:
    """``JobState``'s fields, in its order, as plain data: what the job listing reads without the model."""
    job = snap.get("job") or {}
    launch = snap.get("launch") or {}
    wrapper = snap.get("wrapper") or {}
    state = {"key": key, "status": "launching", "kind": job.get("kind", "other"), "lane": job.get("lane", "gpu"),
             "gpus": job.get("gpus"), "pid": launch.get("pid") or wrapper.get("pid"),
             "child_pgid": wrapper.get("child_pgid"), "launched_at": launch.get("launched_at"), "ended_at": None,
             "exit_code": None, "reason": "", "log_path": log_path, "attached": False}
    ended = snap.get("exit")
    if ended is not None:
        return {**state, **exit_fields(ended, job)}
    if snap.get("alive"):
        state["status"] = "running"
    elif snap.get("command_exit") is not None and not snap.get("job_alive"):
        recorded = {**snap["command_exit"], "reason": "stopped" if snap.get("stop") else "exited"}
        state.update(exit_fields(recorded, job))
        state["reason"] = (state["reason"] + "; " if state["reason"] else "") + \
            "its wrapper died, the job's leader recorded the exit"
    elif snap.get("copied_from"):
        state["status"], state["reason"] = "lost", f"{COPY_NOTE} ({snap['copied_from']})"
    elif snap.get("job_alive"):
        state["status"], state["reason"] = "running", ORPHAN_NOTE
    elif snap.get("stop"):
        state["status"], state["reason"] = "stopped", "stopped (process group killed)"
    elif launch or wrapper:
        state["status"], state["reason"] = "lost", "the job's wrapper died without recording an exit"
    elif snap.get("now", 0) - job.get("intent_at", 0) > SPAWN_WAIT_S:
        state["status"], state["reason"] = "lost", "launch intent recorded but the job never started"
    return state


def with_exit(state: JobState, ended: dict, job: dict) -> JobState:
    """Fill in how the job ended from its exit.json (written by wrapper.py)."""
    for name, value in exit_fields(ended, job).items():
        setattr(state, name, value)
    return state


def exit_fields(ended: dict, job: dict) -> dict:
    """exit_code, ended_at, status and reason of a job that ended, from its exit.json."""
    exit_code = ended.get("exit_code")
    reason = ended.get("reason", "exited")
    if reason == "exited":
        status = "succeeded" if exit_code == 0 else "failed"
        said = "" if exit_code == 0 else f"exit code {exit_code}"
    else:
        status = reason
        timeout = job.get("timeout_s")
        said = reason.replace("_", " ") + (f" after {timeout:g} s" if reason == "timed_out" and timeout else "")
    return {"exit_code": exit_code, "ended_at": ended.get("ended_at"), "status": status, "reason": said}
