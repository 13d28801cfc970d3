"""A Slurm ledger job id is data from a run folder: anything but a job id never reaches ``scancel``
or ``scontrol`` (a ledger saying ``--user=root`` used to become ``scancel --user=root``). Against the
real one-node Slurm of the test session, with a real job of someone else's that must survive."""
from __future__ import annotations

import json
import time

import pytest

from tools.base import ToolError
from tools.jobs.slurm.executor import SlurmExecutor
from tools.jobs.spec import JobSpec

pytestmark = pytest.mark.xdist_group("slurm")


@pytest.mark.parametrize("job_id", ["--user=root", "-u root", "123;456", "12_x"])
def test_a_ledger_job_id_that_is_not_one_is_refused_and_other_jobs_live_on(slurm, tmp_path, job_id):
    other = slurm.run("sbatch", "--parsable", "--job-name=someone-else", f"--output={tmp_path / 'other.out'}",
                      "--wrap", "sleep 120")
    assert other.returncode == 0, other.stderr
    other_id = other.stdout.strip().split(";")[0]
    try:
        ex = SlurmExecutor(tmp_path / "run" / "jobs", env=slurm.env)
        folder = ex.job_dir("crafted")
        folder.mkdir(parents=True)
        (folder / "job.json").write_text(json.dumps({"key": "crafted", "argv": ["true"], "intent_at": time.time(),
                                                     "slurm_name": "dsv4-x-crafted", "slurm_array_index": None}))
        (folder / "slurm.json").write_text(json.dumps({"job_id": job_id}))
        with pytest.raises(ToolError, match="not a job id"):
            ex.stop("crafted")
        with pytest.raises(ToolError, match="not a job id"):
            ex.poll("crafted")
        shown = slurm.run("scontrol", "show", "job", "-o", other_id).stdout
        assert "JobState=PENDING" in shown or "JobState=RUNNING" in shown, shown  # nothing of theirs cancelled
    finally:
        slurm.run("scancel", other_id)


def test_a_ledger_naming_someone_elses_real_job_id_cancels_nothing(slurm, tmp_path):
    """A valid id copied from squeue: scancel gets the job name we gave our job, and Slurm acts only
    on a job with that name, so the other job runs on."""
    other = slurm.run("sbatch", "--parsable", "--job-name=someone-else", f"--output={tmp_path / 'other.out'}",
                      "--wrap", "sleep 120")
    assert other.returncode == 0, other.stderr
    other_id = other.stdout.strip().split(";")[0]
    try:
        ex = SlurmExecutor(tmp_path / "run" / "jobs", env=slurm.env)
        for key, name in (("forged", "dsv4-abcd1234-forged"), ("nameless", "someone-else")):
            folder = ex.job_dir(key)
            folder.mkdir(parents=True)
            (folder / "job.json").write_text(json.dumps({"key": key, "argv": ["true"], "intent_at": time.time(),
                                                         "slurm_name": name, "slurm_array_index": None}))
            (folder / "slurm.json").write_text(json.dumps({"job_id": other_id}))
        ex.stop("forged", grace_s=0)
        with pytest.raises(ToolError, match="names no job name of ours"):
            ex.stop("nameless")
        shown = slurm.run("scontrol", "show", "job", "-o", other_id).stdout
        assert "JobState=PENDING" in shown or "JobState=RUNNING" in shown, shown
    finally:
        slurm.run("scancel", other_id)


def test_a_submissions_record_naming_a_job_that_is_not_ours_holds_nothing_back(slurm, tmp_path):
    """``submissions.jsonl`` is run-folder data too: a job id in it that is not one is refused before it
    reaches Slurm, and a real id of someone else's job (not under the name we gave ours) neither holds
    the key back nor touches that job."""
    other = slurm.run("sbatch", "--parsable", "--job-name=someone-else", f"--output={tmp_path / 'other.out'}",
                      "--wrap", "sleep 120")
    assert other.returncode == 0, other.stderr
    other_id = other.stdout.strip().split(";")[0]
    try:
        ex = SlurmExecutor(tmp_path / "run" / "jobs", env=slurm.env)
        record = ex.root / "submissions.jsonl"
        intent = json.dumps({"slurm_name": f"dsv4-{ex.namespace}-crafted", "keys": ["crafted"], "as_array": False})
        record.write_text(f"{intent}\n{{\"slurm_name\": \"dsv4-{ex.namespace}-crafted\", \"job_id\": \"--user=root\"}}\n"
                          '{"slurm_name": "cut sh')
        with pytest.raises(ToolError, match="not a job id"):
            ex.launch(JobSpec(key="crafted", argv=["true"]))
        assert not ex.job_dir("crafted").exists()
        record.write_text(f"{intent}\n" + json.dumps({"slurm_name": f"dsv4-{ex.namespace}-crafted", "job_id": other_id})
                          + "\n")
        state = ex.launch(JobSpec(key="crafted", argv=["true"]))
        assert not state.attached and json.loads((ex.job_dir("crafted") / "slurm.json").read_text())["job_id"] != other_id
        shown = slurm.run("scontrol", "show", "job", "-o", other_id).stdout
        assert "JobState=PENDING" in shown or "JobState=RUNNING" in shown, shown
    finally:
        slurm.run("scancel", other_id)
