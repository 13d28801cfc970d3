"""A Slurm job requeued after one of its runs ended: the rerun under the same id is the attempt.

Slurm reruns a requeued job (``scontrol requeue``, preemption) under its id. The run it killed
leaves an exit record, which ``slurm_unit.py`` sets aside (``exit.previous.json``) only when the
rerun starts; until then that record would read as the attempt's end, and the caller would submit
the job again beside the rerun. The wrapper writes which run of the job it was (``slurm_restarts``)
into ``exit.json``; Slurm's restart count higher than that, with the job pending or running, means
it was requeued since: the job is launching again.
"""
from __future__ import annotations

from pathlib import Path

from tools.jobs.outages import OutageWait
from tools.jobs.slurm.query import PENDING, RUNNING, show_job
from tools.jobs.spec import JobState


def requeued(state: JobState, ended: dict, slurm: dict, folder: Path, env: dict[str, str],
             outage: OutageWait | None = None) -> JobState | None:
    """``state`` as launching if Slurm requeued the job after the run that wrote ``ended``, else None.

    A clean exit is final (a rerun skips the unit), and so is an end we asked for (stop.json).
    """
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
