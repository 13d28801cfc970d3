"""What is left of a job whose leader is gone, with real processes (issue 31 item 5, docs/servers.md).

A job's command runs in the process group its leader leads. When the leader dies with the wrapper
(``kill -9`` of both, as a crash of the session would do) the command lives on in that group: it is
stopped through the group and the job token it carries, and a command that carries no token is
refused, with one line naming its pids. A wrapper that outlives its leader ends what is left itself
before it records the exit.
"""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli, wait_for
from tests.messages import assert_refusal
from tests.own_processes import OwnPid
from tools.jobs import processes
from tools.jobs.local import LocalExecutor
from tools.jobs.spec import JobSpec

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


@pytest.fixture
def run(tmp_path):
    folder = tmp_path / "runs" / "20260101T000000Z-leftovers"
    (folder / "jobs").mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"goal": "benchmark baseline", "settings": {"executor": "local"}}))
    started: list[OwnPid] = []
    yield folder, started
    for own in started:  # the test's own processes, by the pid and start time it saw them start with
        own.kill()


def _launch(folder: Path, key: str, argv: list[str]) -> tuple[LocalExecutor, dict, int]:
    """The job running, and its command's pid (the group member that is not the leader)."""
    executor = LocalExecutor(folder / "jobs")
    executor.launch(JobSpec(key=key, argv=argv, kind="serve", gpus=[], grace_s=2))
    ledger = folder / "jobs" / key / "wrapper.json"
    wrapper = wait_for(lambda: ledger.exists() and json.loads(ledger.read_text()), 30, "wrapper.json")
    group = wrapper["child_pgid"]
    command = wait_for(lambda: [m for m in processes.group_members(group) if m != group], 30, "the job's command")[0]
    return executor, wrapper, command


def _kill_wrapper_and_leader(executor: LocalExecutor, key: str, wrapper: dict) -> None:
    os.kill(wrapper["pid"], signal.SIGKILL)
    os.kill(wrapper["child_pgid"], signal.SIGKILL)
    wait_for(lambda: executor.poll(key) and processes.start_time(wrapper["pid"]) is None
             and processes.start_time(wrapper["child_pgid"]) is None, 30, "the wrapper and the leader to die")


def test_a_command_left_by_its_killed_wrapper_and_leader_is_stopped_by_jobs_stop(run):
    folder, started = run
    executor, wrapper, command = _launch(folder, "serve-baseline", SLEEPER)
    started.append(OwnPid(command))
    _kill_wrapper_and_leader(executor, "serve-baseline", wrapper)
    assert executor.poll("serve-baseline").status == "running"  # its group runs on: never started twice

    out = run_cli("jobs", str(folder), "--stop", "serve-baseline", cwd=folder)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "serve-baseline: stopped" in out.stdout
    assert processes.start_time(command) is None  # the command itself is gone, not only its ledger
    assert not processes.group_members(wrapper["child_pgid"])


def test_a_command_without_the_job_token_is_refused_in_one_line_and_left_alone(run):
    """A command that dropped the token from its environment cannot be told from someone else's
    process in a reused group: nothing is signalled, and the command fails naming its pids."""
    folder, started = run
    executor, wrapper, command = _launch(folder, "serve-baseline",
                                         ["env", "-u", processes.TOKEN_VARIABLE, *SLEEPER])
    started.append(OwnPid(command))
    other, other_wrapper, other_command = _launch(folder, "serve-mtp", SLEEPER)
    started.append(OwnPid(other_command))
    _kill_wrapper_and_leader(executor, "serve-baseline", wrapper)

    out = run_cli("jobs", str(folder), "--stop", "serve-baseline", cwd=folder)
    assert_refusal(out, "'serve-baseline'", f"pids {command}", "no job token",
                   f"kill -TERM -- -{wrapper['child_pgid']}")
    assert processes.start_time(command) is not None  # never signalled

    every = run_cli("jobs", str(folder), "--stop", "all", cwd=folder)
    assert processes.start_time(other_command) is None  # the one it could stop is stopped ...
    assert every.returncode != 0 and "serve-mtp: stopped" in every.stdout, every.stdout + every.stderr
    assert_refusal(every, f"pids {command}")  # ... the other named
    assert processes.start_time(command) is not None


def test_a_wrapper_that_outlives_its_leader_ends_the_rest_of_the_group_before_recording_the_exit(run):
    folder, started = run
    executor, wrapper, command = _launch(folder, "serve-baseline", SLEEPER)
    started.append(OwnPid(command))
    os.kill(wrapper["child_pgid"], signal.SIGKILL)  # the leader alone
    exit_file = folder / "jobs" / "serve-baseline" / "exit.json"
    wait_for(exit_file.exists, 60, "the wrapper to record the exit")
    assert processes.start_time(command) is None  # gone before the exit was recorded
    assert executor.poll("serve-baseline").done
    assert "what is left of its group" in (folder / "jobs" / "serve-baseline" / "log.txt").read_text()
