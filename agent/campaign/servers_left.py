"""A run that ends leaves no server of its own running.

What the benchmark did not stop (a server whose wrapper and leader were killed, one the agent died
before stopping) is stopped here before ``result.json``, through the job's recorded process group
and token (tools/jobs/job_folder.py). One that cannot be stopped is named in ``servers_left`` and
turns ``finished`` into ``failed`` (``server_not_stopped``). An interrupted run is left alone:
``resume`` re-attaches to its jobs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.campaign.runtime import Runtime

SERVER_NOT_STOPPED = "server_not_stopped"  # result.json's and run_finished's reason


def end_servers(rt: Runtime, status: str, summary: str, result_extra: dict | None,
                event_fields: dict) -> tuple[str, str, dict | None]:
    """(status, summary, result fields) once the run's servers are gone, or naming those that are not;
    ``event_fields`` (run_finished's) gets the same names."""
    if status == "interrupted":
        return status, summary, result_extra
    stopped, left = rt.source.stop_servers(rt.run, rt.executor)
    for state in stopped:
        rt.trace.emit("job_finished", "control", key=state.key, kind=state.kind, status=state.status)
        rt.say(f"[control] stopped server job {state.key}: the run no longer needs it")
    if not left:
        return status, summary, result_extra
    event_fields["servers_left"] = left
    extra = {**(result_extra or {}), "servers_left": left}
    summary = f"{summary}; a server of this run could not be stopped: {left[0]}" + \
              (f" (and {len(left) - 1} more, in result.json's servers_left)" if len(left) > 1 else "")
    if status == "finished":
        status = "failed"
        event_fields["reason"] = extra["reason"] = SERVER_NOT_STOPPED
    return status, summary, extra
