"""SlurmExecutor against a real one-node Slurm (munged + slurmctld + slurmd, tests/services/start_slurm.sh).

No doubles except the GPUs: the node advertises two fake GPUs (gres "gpu" backed by character
devices that are not GPUs), which is enough for Slurm to schedule GPU requests and set
CUDA_VISIBLE_DEVICES. If CI already started the cluster (pid files under /tmp/dsv4-test-services),
it is reused; otherwise the session starts one and stops it at the end, by pid files.
"""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.slowdown import limit, until_accepted, wait_for
from tools.base import ToolError
from tools.jobs.factory import make_executor
from tools.jobs.slurm.executor import SlurmExecutor
from tools.jobs.spec import JobSpec

REPO = Path(__file__).parent.parent

# One Slurm cluster for the whole session (tests/slurm_cluster.py): these tests share one xdist
# worker (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("slurm")


def _wait(ex, key: str, until, timeout_s: float = 60.0):
    deadline = time.monotonic() + limit(timeout_s)
    while time.monotonic() < deadline:
        state = ex.poll(key)
        if until(state):
            return state
        time.sleep(0.3)
    raise AssertionError(f"job {key} did not reach the expected state; last: {state}")


def _job_id(ex: SlurmExecutor, key: str) -> str:
    return json.loads((ex.job_dir(key) / "slurm.json").read_text())["job_id"]


def test_gpu_job_is_scheduled_with_its_gpus_and_succeeds(slurm, tmp_path):
    ex = SlurmExecutor(tmp_path / "run-a" / "jobs", env=slurm.env)
    ex.launch(JobSpec(key="one", argv=["bash", "-c", "echo CVD=$CUDA_VISIBLE_DEVICES; echo ok > result.txt"], gpus=[3]))
    state = _wait(ex, "one", lambda s: s.done)
    assert state.status == "succeeded" and state.exit_code == 0
    assert ex.read_log("one").strip() in ("CVD=0", "CVD=1")  # Slurm picked the device, not our index 3
    assert (ex.job_dir("one") / "result.txt").read_text() == "ok\n"  # cwd defaults to the job folder

    both = SlurmExecutor(tmp_path / "run-b" / "jobs", env=slurm.env, gpu_request="gpus")
    both.launch(JobSpec(key="two", argv=["bash", "-c", "echo CVD=$CUDA_VISIBLE_DEVICES"], gpus=[0, 1]))
    assert _wait(both, "two", lambda s: s.done).status == "succeeded"
    assert both.read_log("two").strip() == "CVD=0,1"
    assert "TresPerJob=gres:gpu:2" in slurm.run("scontrol", "show", "job", "-o", _job_id(both, "two")).stdout


def test_failing_job_reports_its_exit_code(slurm, tmp_path):
    ex = SlurmExecutor(tmp_path / "run-c" / "jobs", env=slurm.env)
    ex.launch(JobSpec(key="bad", argv=["bash", "-c", "echo broken; exit 4"]))
    state = _wait(ex, "bad", lambda s: s.done)
    assert (state.status, state.exit_code, state.reason) == ("failed", 4, "exit code 4")
    assert "broken" in ex.read_log("bad")


def test_units_go_out_as_one_array_and_relaunch_reattaches(slurm, tmp_path):
    ex = SlurmExecutor(tmp_path / "run-d" / "jobs", env=slurm.env)
    specs = [JobSpec(key=f"tune-gpu{i}", argv=["bash", "-c", f"echo unit {i}"], gpus=[i]) for i in range(3)]
    states = ex.launch_array(specs)
    ids = [_job_id(ex, s.key) for s in specs]
    array_id = ids[0].split("_")[0]
    assert ids == [f"{array_id}_{i}" for i in range(3)] and not any(s.attached for s in states)
    for i, spec in enumerate(specs):
        assert _wait(ex, spec.key, lambda s: s.done).status == "succeeded"
        assert ex.read_log(spec.key).strip() == f"unit {i}"
    again = SlurmExecutor(tmp_path / "run-d" / "jobs", env=slurm.env).launch_array(specs)
    assert all(s.attached and s.status == "succeeded" for s in again)
    assert len(list((tmp_path / "run-d" / "jobs").glob("*.sbatch"))) == 1  # nothing submitted twice
    with pytest.raises(ToolError, match="same GPU count"):
        ex.launch_array([JobSpec(key="x1", argv=["true"], gpus=[0]), JobSpec(key="x2", argv=["true"], gpus=[0, 1])])


def test_agent_killed_and_restarted_reattaches(slurm, tmp_path):
    jobs_root = tmp_path / "run-e" / "jobs"
    argv = ["bash", "-c", "echo unit-start-marker; sleep 2"]
    agent_code = textwrap.dedent(f"""
        import json, os, time
        from tools.jobs.slurm.executor import SlurmExecutor
        from tools.jobs.spec import JobSpec
        ex = SlurmExecutor({str(jobs_root)!r}, env=dict(os.environ, SLURM_CONF={slurm.env['SLURM_CONF']!r}))
        ex.launch(JobSpec(key="long", argv={argv!r}))
        print("launched", flush=True)
        time.sleep(600)
    """)
    agent = subprocess.Popen([sys.executable, "-c", agent_code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert agent.stdout.readline().strip() == "launched"
    agent.send_signal(signal.SIGKILL)
    agent.wait()
    ex = SlurmExecutor(jobs_root, env=slurm.env)
    first_id = _job_id(ex, "long")
    again = ex.launch(JobSpec(key="long", argv=argv))
    assert again.attached and _job_id(ex, "long") == first_id
    assert _wait(ex, "long", lambda s: s.done).status == "succeeded"
    assert ex.read_log("long").count("unit-start-marker") == 1

    # a crash between sbatch and writing slurm.json: the job is found again by its name
    (ex.job_dir("long") / "slurm.json").unlink()
    (ex.job_dir("long") / "wrapper.json").unlink()
    recovered = SlurmExecutor(jobs_root, env=slurm.env).launch(JobSpec(key="long", argv=argv))
    assert recovered.attached and _job_id(ex, "long") == first_id
    assert ex.read_log("long").count("unit-start-marker") == 1


def test_stop_ends_the_job_and_its_processes(slurm, tmp_path):
    ex = SlurmExecutor(tmp_path / "run-f" / "jobs", env=slurm.env)
    ex.launch(JobSpec(key="serve", argv=["bash", "-c", "sleep 300 & sleep 301; wait"], grace_s=1))
    running = _wait(ex, "serve", lambda s: s.status == "running")
    stopped = ex.stop("serve")
    assert stopped.status == "stopped"
    listing = subprocess.run(["ps", "-o", "stat=", "--sid", str(running.child_pgid)], capture_output=True, text=True)
    assert [line for line in listing.stdout.splitlines() if not line.strip().startswith("Z")] == []
    pending = ex.launch(JobSpec(key="never", argv=["true"], gpus=[0, 1]))  # stop before it starts
    assert ex.stop(pending.key).status in ("stopped", "succeeded")
    assert slurm.run("squeue", "-h", "-j", _job_id(ex, "never")).stdout.strip() == ""


def test_requeued_unit_that_already_succeeded_is_not_run_again(slurm, tmp_path):
    ex = SlurmExecutor(tmp_path / "run-g" / "jobs", env=slurm.env)
    ex.launch(JobSpec(key="good", argv=["bash", "-c", "echo good-marker"]))
    ex.launch(JobSpec(key="flaky", argv=["bash", "-c", "echo flaky-marker; test -e second-try || { touch second-try; exit 1; }"]))
    assert _wait(ex, "good", lambda s: s.done).status == "succeeded"
    assert _wait(ex, "flaky", lambda s: s.done).status == "failed"
    for key in ("good", "flaky"):
        job_id = _job_id(ex, key)
        # the unit's exit.json comes before Slurm has finished the job: requeue it once Slurm has it as ended
        # (the wrapper exits 0 for a failed command too: its exit.json carries the command's code)
        wait_for(lambda: "JobState=COMPLETED " in slurm.run("scontrol", "show", "job", "-o", job_id).stdout, 60,
                 f"Slurm to record job {key} as ended")
        assert slurm.run("scontrol", "requeue", job_id).returncode == 0
    for key in ("good", "flaky"):
        deadline = time.monotonic() + limit(60)
        while "Restarts=1" not in (shown := slurm.hurry_requeued(_job_id(ex, key))) \
                or "JobState=COMPLETED" not in shown:
            if time.monotonic() > deadline:
                pytest.fail(f"job {key} was not requeued and completed again: {shown}")
            time.sleep(0.3)
    assert ex.poll("good").status == "succeeded"
    assert ex.read_log("good").count("good-marker") == 1
    assert "not running it again" in ex.read_log("good")
    assert ex.poll("flaky").status == "succeeded"  # the failed unit did run again
    assert ex.read_log("flaky").count("flaky-marker") == 2
    assert json.loads((ex.job_dir("flaky") / "exit.previous.json").read_text())["exit_code"] == 1


def test_node_goes_away_and_comes_back(slurm, tmp_path):
    ex = SlurmExecutor(tmp_path / "run-h" / "jobs", env=slurm.env)
    go = tmp_path / "go"  # the job runs until the test lets it end, however slow the machine
    ex.launch(JobSpec(key="during", argv=["bash", "-c", f"echo start; while [ ! -e {go} ]; do sleep 0.05; done; echo end"]))
    _wait(ex, "during", lambda s: s.status == "running")
    slurm.stop_slurmd()
    try:
        assert ex.poll("during").status == "running"  # slurmd gone; the job itself is fine
        waiting = ex.launch(JobSpec(key="queued", argv=["bash", "-c", "echo ran-after-return"]))
        time.sleep(2)  # a chance to run, which it must not take while its node's slurmd is away
        assert ex.poll("queued").status == "launching" and not waiting.done
    finally:
        slurm.start_slurmd()
        go.touch()
    assert _wait(ex, "during", lambda s: s.done).status == "succeeded"
    assert ex.read_log("during").split() == ["start", "end"]
    assert _wait(ex, "queued", lambda s: s.done).status == "succeeded"
    assert ex.read_log("queued").strip() == "ran-after-return"


def test_no_slurm_commands_on_path_is_a_clear_error(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    with pytest.raises(ToolError, match="'sbatch' is not on PATH; load Slurm"):
        SlurmExecutor(tmp_path / "run-i" / "jobs", env={"PATH": str(empty)})
    assert not (tmp_path / "run-i").exists()  # nothing written, nothing submitted


def test_unknown_partition_and_refused_request_leave_nothing_behind(slurm, tmp_path, monkeypatch):
    with pytest.raises(ToolError, match=r"partition 'gpu-h200' does not exist; partitions here: debug"):
        SlurmExecutor(tmp_path / "run-j" / "jobs", env=slurm.env, partition="gpu-h200")
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])  # the factory reads the user's environment
    with pytest.raises(ToolError, match="partition 'nope' does not exist"):
        make_executor("slurm:nope", tmp_path / "run-k" / "jobs")
    ex = make_executor("slurm:debug", tmp_path / "run-l" / "jobs")
    assert isinstance(ex, SlurmExecutor) and ex.partition == "debug"
    with pytest.raises(ToolError, match="sbatch refused the job"):
        ex.launch(JobSpec(key="greedy", argv=["true"], gpus=list(range(8))))  # the node has 2
    assert not (ex.job_dir("greedy") / "job.json").exists()  # a retry may submit again
    assert slurm.run("squeue", "-h", "-n", f"dsv4-{ex.namespace}-greedy").stdout.strip() == ""


def test_detect_gpus_reads_the_partition_gres_after_the_run_folder_probe(slurm, tmp_path):
    ex = SlurmExecutor(tmp_path / "run-p" / "jobs", env=slurm.env, partition="debug")
    found = ex.detect_gpus()
    assert [g.index for g in found.gpus] == [0, 1] and found.note == ""
    probe = json.loads((tmp_path / "run-p" / "jobs" / "shared_probe.json").read_text())
    assert probe["ok"] is True  # a compute node read the token in the run folder
    assert not list((tmp_path / "run-p" / "jobs").glob("probe-*"))  # the probe's folder is tidied


def test_tune_kernels_campaign_runs_its_units_as_one_job_array(slurm, tmp_path, sglang_wheel_root):
    from collections import Counter

    from tests.campaign_fixtures import campaign_args
    from tests.cli_helpers import only_run, run_cli

    calls = tmp_path / "tune_calls.txt"
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "SLURM_CONF": slurm.env["SLURM_CONF"],  # no nvidia-smi here
           "DSV4_DOUBLE_UNIT_S": "0.05", "DSV4_DOUBLE_CALLS": str(calls)}
    out = run_cli(*campaign_args(tmp_path, sglang_wheel_root, goal="tune kernels"), "--executor", "slurm:debug",
                  cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    run = only_run(tmp_path)
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "finished" and result["steps"] == {"tune_kernels": "done"}, result
    preflight = json.loads((run / "preflight.json").read_text())
    assert [g["index"] for g in preflight["gpus"]] == [0, 1]  # the partition's gres, not this machine
    ids = [json.loads((run / "jobs" / f"tune-gpu{g}" / "slurm.json").read_text())["job_id"] for g in (0, 1)]
    array = {i.split("_")[0] for i in ids}
    assert len(array) == 1 and sorted(i.split("_")[1] for i in ids) == ["0", "1"], ids  # ONE job array
    assert f"ArrayJobId={array.pop()}" in slurm.run("scontrol", "show", "job", "-o", ids[0]).stdout
    installed = json.loads((run / "steps" / "tune_kernels.json").read_text())["data"]["installed"]
    assert len(installed) == 2 and all(Path(p).exists() for p in installed)
    unit_calls = Counter(calls.read_text().splitlines())
    assert unit_calls and max(unit_calls.values()) == 1


def test_a_unit_whose_folder_was_deleted_while_it_runs_is_never_submitted_twice(slurm, tmp_path):
    """``jobs/<key>/`` (with its slurm.json) deleted while its array task runs: a new agent's launch
    finds the task by the job id recorded beside the folders (``submissions.jsonl``), still RUNNING,
    and refuses naming it; once it has ended, the key is submitted afresh and the others re-attach."""
    go = tmp_path / "go"
    jobs_root = tmp_path / "run-o" / "jobs"
    specs = [JobSpec(key=f"tune-gpu{i}", argv=["bash", "-c", f"echo start >> {tmp_path}/starts-{i}; "
                                                            f"while [ ! -e {go} ]; do sleep 0.05; done"], gpus=[i])
             for i in range(2)]
    ex = SlurmExecutor(jobs_root, env=slurm.env)
    ex.launch_array(specs)
    ids = [_job_id(ex, s.key) for s in specs]
    try:
        for spec in specs:
            _wait(ex, spec.key, lambda s: s.status == "running")
        # "running" comes as the wrapper starts its leader, before the leader reads job.json: a folder
        # deleted in between leaves no command at all. Delete it once both commands have begun.
        wait_for(lambda: all((tmp_path / f"starts-{i}").exists() for i in range(2)), 60, "both units' commands")
        shutil.rmtree(ex.job_dir("tune-gpu0"))
        with pytest.raises(ToolError) as refused:
            SlurmExecutor(jobs_root, env=slurm.env).launch_array(specs)
        said = str(refused.value)
        assert f"Slurm job {ids[0]}" in said and "RUNNING" in said and "not submitted a second time" in said
        assert f"scancel {ids[0]}" in said and not ex.job_dir("tune-gpu0").exists()
        assert len(list(jobs_root.glob("*.sbatch"))) == 1  # nothing submitted
    finally:
        go.touch()  # the units end (the test's own jobs, whatever failed)
    again = until_accepted(lambda: SlurmExecutor(jobs_root, env=slurm.env).launch_array(specs),
                           "not submitted a second time", 60, "Slurm to let the key go")
    assert [s.attached for s in again] == [False, True] and _job_id(ex, "tune-gpu0") not in ids
    assert _wait(ex, "tune-gpu0", lambda s: s.done).status == "succeeded"
    assert (tmp_path / "starts-0").read_text() == "start\nstart\n" and (tmp_path / "starts-1").read_text() == "start\n"
