"""Slurm requeues a running unit (``scontrol requeue``, preemption): the rerun under the same job id
is the attempt. The agent follows it to its result and never submits the job again beside it.

Real one-node Slurm (tests/slurm_cluster.py); the tuning script is the test double
(tests/doubles/tuning_block_wise_kernel.py), whose DSV4_DOUBLE_EXCLUSIVE lock records any two
copies of one job that run at once.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.campaign_fixtures import campaign_args
from tests.cli_helpers import limit, start_agent, wait_for
from tools.jobs.slurm.executor import SlurmExecutor
from tools.jobs.spec import JobSpec

pytestmark = pytest.mark.xdist_group("slurm")  # one Slurm cluster for the session


def _shown(slurm, job_id: str) -> str:
    return slurm.run("scontrol", "show", "job", "-o", job_id).stdout


def _release_requeued(slurm, job_id: str) -> bool:
    """True once the requeued job runs again or has ended (Slurm's requeue delay cut short)."""
    shown = slurm.hurry_requeued(job_id)
    return "Restarts=1" in shown and ("JobState=RUNNING" in shown or "JobState=COMPLETED" in shown)


def test_requeued_unit_is_followed_to_its_rerun_result(slurm, tmp_path):
    ex = SlurmExecutor(tmp_path / "run" / "jobs", env=slurm.env)
    ex.launch(JobSpec(key="unit", argv=["bash", "-c", 'echo "run ${SLURM_RESTART_COUNT:-0}"; '
                                        'test "${SLURM_RESTART_COUNT:-0}" -ge 1 || exec sleep 300'], grace_s=1))
    wait_for(lambda: ex.poll("unit").status == "running" and "run 0" in ex.read_log("unit"), 60, "the unit to run")
    job_id = json.loads((ex.job_dir("unit") / "slurm.json").read_text())["job_id"]
    assert slurm.run("scontrol", "requeue", job_id).returncode == 0
    requeued = wait_for(lambda: (s := ex.poll("unit")).reason.startswith("Slurm requeued") and s, 60,
                        "the poll to see the requeue")
    assert not requeued.done and requeued.status == "launching", requeued
    assert f"Slurm requeued job {job_id} (restart 1)" in requeued.reason
    wait_for(lambda: _release_requeued(slurm, job_id), 60, f"job {job_id} to run again")
    ended = wait_for(lambda: (s := ex.poll("unit")).done and s, 60, "the rerun to end")
    assert (ended.status, ended.exit_code) == ("succeeded", 0), ended
    assert [line for line in ex.read_log("unit").splitlines() if line.startswith("run")] == ["run 0", "run 1"]
    first = json.loads((ex.job_dir("unit") / "exit.previous.json").read_text())  # the killed run's, set aside
    assert first["slurm_restarts"] == 0 and first["exit_code"] != 0, first
    assert json.loads((ex.job_dir("unit") / "exit.json").read_text())["slurm_restarts"] == 1


def test_requeued_tune_unit_is_the_attempt_not_submitted_again(slurm, tmp_path, sglang_wheel_root):
    exclusive = tmp_path / "copies"
    exclusive.mkdir()
    calls, hold = tmp_path / "tune_calls.txt", tmp_path / "hold"
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "SLURM_CONF": slurm.env["SLURM_CONF"],
           "DSV4_DOUBLE_UNIT_S": "0.05", "DSV4_DOUBLE_CALLS": str(calls), "DSV4_DOUBLE_EXCLUSIVE": str(exclusive),
           # the first tune() call of each copy waits while the hold file exists: the first run of a unit is
           # still tuning when it is requeued, whatever the machine's speed
           "DSV4_DOUBLE_TUNE_HOLD_FILE": str(hold)}
    hold.write_text("held until the requeue\n")
    agent = start_agent(*campaign_args(tmp_path, sglang_wheel_root, goal="tune kernels"), "--executor", "slurm:debug",
                        cwd=tmp_path, env=env)
    try:
        folder = wait_for(lambda: next(iter((tmp_path / "runs").glob("*/jobs/tune-gpu0")), None), 120,
                          "the tune job's folder")
        wait_for(lambda: len(list(exclusive.glob("*.lock"))) == 2, 120, "both tune jobs inside their first tune()")
        job_id = json.loads((folder / "slurm.json").read_text())["job_id"]
        assert slurm.run("scontrol", "requeue", job_id).returncode == 0
        wait_for(lambda: "Restarts=1" in _shown(slurm, job_id), 60, f"job {job_id} to be requeued")
        # the killed run's record, written once its wrapper has ended its group: let go of the hold only
        # then, or the killed run's held unit could still finish (and count) after the requeue
        wait_for((folder / "exit.json").exists, 60, "the requeued run to end")
        hold.unlink()
        wait_for(lambda: _release_requeued(slurm, job_id), 120, f"job {job_id} to run again")
        out, _ = agent.communicate(timeout=limit(180))
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.communicate()
    assert agent.returncode == 0, out
    run = folder.parent.parent
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "finished" and result["steps"] == {"tune_kernels": "done"}, result
    # ONE submission: the first attempts' array; the rerun is that array's task, under the same id
    assert len(list((run / "jobs").glob("dsv4-*-array-*.sbatch"))) == 1
    assert sorted(p.name for p in (run / "jobs").glob("tune-*")) == ["tune-gpu0", "tune-gpu1"]
    shown = _shown(slurm, job_id)
    assert "Restarts=1" in shown and "JobState=COMPLETED" in shown, shown
    assert json.loads((folder / "exit.previous.json").read_text())["slurm_restarts"] == 0  # the killed run's
    assert not (exclusive / "overlaps.txt").exists(), (exclusive / "overlaps.txt").read_text()
    unit_calls = Counter(calls.read_text().splitlines())
    assert unit_calls and max(unit_calls.values()) == 1  # the held calls were killed before they counted
    events = [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]
    launched = [e["key"] for e in events if e["type"] == "job_launched" and e.get("kind") == "tune"]
    assert sorted(launched) == ["tune-gpu0", "tune-gpu1"], launched
    # followed to the rerun's end (a poll in the window between the two runs says "Slurm requeued job ...")
    finished = [e["status"] for e in events if e["type"] == "job_finished" and e.get("key") == "tune-gpu0"]
    assert finished == ["succeeded"], finished
    installed = json.loads((run / "steps" / "tune_kernels.json").read_text())["data"]["installed"]
    assert len(installed) == 2 and all(Path(p).exists() for p in installed)
