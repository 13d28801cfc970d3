"""Only our processes are signalled, and the job is its own process group (issue 13 item 4, issue 14
item 3), with real processes: a ``sleep`` of the test's own stands for someone else's process, a
crafted run folder for a ledger that does not say who its processes are, and kill -9 of a job's
wrapper for the crash that used to start a second tuner beside the first."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.campaign_fixtures import campaign_args, campaign_env
from tests.cli_helpers import only_run, run_cli, start_agent, wait_for
from tests.messages import assert_refusal
from tests.slowdown import limit
from tools.jobs import processes


@pytest.fixture
def foreign_sleep():
    """A process that is not the agent's: its own session and group, like another user's job."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def _crafted_run(tmp_path: Path, key: str, ledger: dict[str, dict], **job_fields) -> Path:
    run = tmp_path / "runs" / "20260101T000000Z-crafted"
    (run / "jobs" / key).mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"goal": "tune kernels", "settings": {"executor": "local"}}))
    job = {"key": key, "argv": ["sleep", "300"], "kind": "tune", "lane": "gpu", "gpus": [0], "intent_at": time.time(),
           **job_fields}
    (run / "jobs" / key / "job.json").write_text(json.dumps(job))
    for name, data in ledger.items():
        (run / "jobs" / key / f"{name}.json").write_text(json.dumps(data))
    return run


def _alive(proc: subprocess.Popen) -> bool:
    return proc.poll() is None


def test_stop_refuses_a_process_whose_start_time_was_never_recorded(tmp_path, foreign_sleep):
    """A kill between starting a job and writing its ledger leaves a pid without a start time."""
    run = _crafted_run(tmp_path, "tune-gpu0", {"wrapper": {"pid": foreign_sleep.pid, "child_pgid": None}})
    out = run_cli("jobs", str(run), "--stop", "tune-gpu0", cwd=tmp_path)
    assert_refusal(out, "'tune-gpu0'", "no start time", f"kill -TERM -- -{foreign_sleep.pid}")
    time.sleep(0.3)
    assert _alive(foreign_sleep)
    assert not (run / "jobs" / "tune-gpu0" / "stop.json").exists()  # refused: nothing recorded either


def test_stop_refuses_a_launch_record_without_a_start_time(tmp_path, foreign_sleep):
    run = _crafted_run(tmp_path, "tune-gpu0", {"launch": {"pid": foreign_sleep.pid, "start_time": None}})
    out = run_cli("jobs", str(run), "--stop", "tune-gpu0", cwd=tmp_path)
    assert_refusal(out, "'tune-gpu0'", "no start time")
    assert _alive(foreign_sleep)


def test_stop_never_signals_a_group_the_ledger_only_names(tmp_path, foreign_sleep):
    """wrapper.json naming someone else's process group (no start time of ours, or another one)."""
    group = os.getpgid(foreign_sleep.pid)
    no_time = _crafted_run(tmp_path / "a", "tune-gpu0", {"wrapper": {"pid": 1 << 22, "child_pgid": group}})
    out = run_cli("jobs", str(no_time), "--stop", "tune-gpu0", cwd=tmp_path)
    assert_refusal(out, "'tune-gpu0'", f"process group {group}")
    wrong_time = _crafted_run(tmp_path / "b", "tune-gpu0", {"wrapper": {
        "pid": 1 << 22, "start_time": "1", "child_pgid": group, "child_start_time": "1"}})
    out = run_cli("jobs", str(wrong_time), "--stop", "tune-gpu0", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr  # nothing of ours runs: recorded as stopped
    time.sleep(0.3)
    assert _alive(foreign_sleep)
    listed = run_cli("jobs", str(wrong_time), cwd=tmp_path)
    assert "tune-gpu0" in listed.stdout and "running" not in listed.stdout  # not taken for our job either


def test_a_ledger_copying_a_foreign_process_pid_and_start_time_gets_nothing_signalled(tmp_path, foreign_sleep):
    """pid, group and kernel start time copied from /proc: what a forged ledger can know. It cannot
    put our job token into the environment the foreign process started with."""
    pid, start = foreign_sleep.pid, processes.start_time(foreign_sleep.pid)
    copied = {"launch": {"pid": pid, "start_time": start},
              "wrapper": {"pid": pid, "start_time": start, "child_pgid": pid, "child_start_time": start}}
    with_token = _crafted_run(tmp_path / "a", "tune-gpu0", copied, token="0123456789abcdef0123456789abcdef")
    out = run_cli("jobs", str(with_token), "--stop", "tune-gpu0", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr  # none of its processes is ours: nothing to stop
    listed = run_cli("jobs", str(with_token), cwd=tmp_path)
    assert "tune-gpu0" in listed.stdout and "running" not in listed.stdout, listed.stdout
    without = _crafted_run(tmp_path / "b", "tune-gpu0", copied)  # as an older agent's ledger would be
    out = run_cli("jobs", str(without), "--stop", "tune-gpu0", cwd=tmp_path)
    assert_refusal(out, "'tune-gpu0'", "no job token", f"kill -TERM -- -{pid}")
    assert not (without / "jobs" / "tune-gpu0" / "stop.json").exists()
    assert _alive(foreign_sleep) and processes.start_time(pid) == start  # never signalled
    assert not processes.carries_token(pid, "0123456789abcdef0123456789abcdef")


def test_a_job_we_started_carries_its_token_and_is_stopped(tmp_path):
    from tools.jobs.local import LocalExecutor
    from tools.jobs.spec import JobSpec

    executor = LocalExecutor(tmp_path / "jobs")
    executor.launch(JobSpec(key="sleeper", argv=["sleep", "300"], gpus=[]))
    job = json.loads((tmp_path / "jobs" / "sleeper" / "job.json").read_text())
    wrapper = wait_for(lambda: json.loads((tmp_path / "jobs" / "sleeper" / "wrapper.json").read_text())
                       if (tmp_path / "jobs" / "sleeper" / "wrapper.json").exists() else None, 30, "wrapper.json")
    members = processes.group_members(wrapper["child_pgid"])
    assert members and all(processes.carries_token(m, job["token"]) for m in members)  # leader and command
    assert processes.carries_token(wrapper["pid"], job["token"])
    assert executor.stop("sleeper").status == "stopped"
    assert not processes.group_alive(wrapper["child_pgid"], wrapper["child_start_time"])


def _tune_started(root: Path) -> bool:
    runs = list((root / "runs").glob("*/jobs/tune-gpu0/wrapper.json")) if (root / "runs").exists() else []
    return bool(runs) and (root / "tune_calls.txt").exists()


def test_kill_9_of_the_wrapper_mid_job_then_resume_runs_the_job_once(tmp_path, sglang_wheel_root):
    """The wrapper dies, the agent dies; the tuner runs on in its own group. Resume re-attaches to
    that group (no second tuner on the GPU, no retry job) and learns its exit from the job's leader."""
    env = campaign_env(tmp_path, unit_s=0.5)
    proc = start_agent(*campaign_args(tmp_path, sglang_wheel_root, goal="tune kernels"), cwd=tmp_path, env=env)
    wait_for(lambda: _tune_started(tmp_path), 120, "the first tuning unit to start")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=limit(10))
    run = only_run(tmp_path)
    folder = run / "jobs" / "tune-gpu0"
    wrapper = json.loads((folder / "wrapper.json").read_text())
    os.kill(wrapper["pid"], signal.SIGKILL)
    wait_for(lambda: processes.start_time(wrapper["pid"]) is None, 10, "the wrapper to be gone")
    assert processes.is_group_leader(wrapper["child_pgid"], wrapper["child_start_time"])  # the tuner runs on
    status = run_cli("jobs", str(run), cwd=tmp_path, env=env)
    assert "tune-gpu0" in status.stdout and "its wrapper died" in status.stdout, status.stdout

    out = run_cli("resume", str(run), cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads((run / "result.json").read_text())["status"] == "finished"
    calls = Counter((tmp_path / "tune_calls.txt").read_text().splitlines())
    assert calls and max(calls.values()) == 1, calls.most_common(3)  # every unit tuned once, on one GPU
    assert not list(run.glob("jobs/tune-gpu0-retry*"))  # never relaunched beside it
    ended = json.loads((folder / "exit.json").read_text())
    assert ended["exit_code"] == 0 and ended["recorded_by"] == "ledger"  # the leader's record of the exit
    assert not processes.group_alive(wrapper["child_pgid"], wrapper["child_start_time"])
