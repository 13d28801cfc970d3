"""A requeued Slurm job's rerun, under the same id, is the attempt, not a reason to submit again.

Until the rerun starts, the killed run's exit.json would read as the attempt's end. The wrapper
records which run wrote it (``slurm_restarts``); a higher restart count at Slurm means a requeue.
"""
from __future__ import annotations

from pathlib import Path

from tools.jobs.outages import OutageWait
from tools.jobs.slurm.query import PENDING, RUNNING, show_job
from tools.jobs.spec import JobState


def requeued(state: JobState, ended: dict, slurm: dict, folder: Path, env: dict[str, str],
             outage: OutageWait | None = None) -> JobState | None:
    """``state`` as launching if Slurm requeued the job after the run that wrote ``ended``, else None;
    a clean exit or a stop we asked for is final."""
    if (ended.get("reason") == "exited" and ended.get("exit_code") == 0) or "job_id" not in slurm \
            or (folder / "stop.json").exists():
        return None
    info = show_job(slurm["job_id"], env, outage)
    run = ended.get("slurm_restarts") if isinstance(ended.get("slurm_restarts"), int) else 0
    if info is None or info.restarts <= run or info.state not in PENDING | RUNNING:
        return None
    waiting = f"{info.state.lower()}: {info.reason}" if info.reason not in ("", "None") else info.state.lower()
    state.status, state.reason = "launching", (f"Slurm requeued job {slurm['job_id']} (restart {info.restarts}); "
                                               f"following its rerun ({waiting})")
    return state
