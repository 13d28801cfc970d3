"""LocalExecutor with real subprocesses: launch, re-attach, timeout, stop, survival, pid safety."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.slowdown import limit, wait_for
from tools.base import ToolError
from tools.jobs import JobSpec, LocalExecutor, processes


def wait_done(ex: LocalExecutor, key: str, seconds: float = 20.0):
    deadline = time.monotonic() + limit(seconds)
    while time.monotonic() < deadline:
        state = ex.poll(key)
        if state.done:
            return state
        time.sleep(0.05)
    raise AssertionError(f"{key} did not finish in {limit(seconds):g} s: {ex.poll(key)}")


def test_job_output_exit_code_and_gpu_env(tmp_path: Path):
    ex = LocalExecutor(tmp_path)
    spec = JobSpec(key="probe", argv=[sys.executable, "-c",
                   "import os,sys; print('cvd=' + os.environ['CUDA_VISIBLE_DEVICES']); print('x=' + os.environ['X']);"
                   "sys.exit(3)"], gpus=[2, 5], env={"X": "a b;$(echo no)"})
    ex.launch(spec)
    state = wait_done(ex, "probe")
    assert state.status == "failed" and state.exit_code == 3 and state.reason == "exit code 3"
    log = ex.read_log("probe")
    assert "cvd=2,5" in log
    assert "x=a b;$(echo no)" in log  # an env value is data, never evaluated by a shell


def test_launching_a_key_twice_reattaches_instead_of_starting_again(tmp_path: Path):
    ex = LocalExecutor(tmp_path)
    counter = tmp_path / "starts"
    argv = ["bash", "-c", f"echo started >> {counter}; sleep 1"]
    first = ex.launch(JobSpec(key="once", argv=argv))
    again = LocalExecutor(tmp_path).launch(JobSpec(key="once", argv=argv))  # a "restarted agent"
    assert again.attached and again.pid == first.pid
    wait_done(ex, "once")
    after = LocalExecutor(tmp_path).launch(JobSpec(key="once", argv=argv))
    assert after.attached and after.status == "succeeded"
    assert counter.read_text().count("started") == 1


def test_same_key_for_a_different_command_is_refused(tmp_path: Path):
    ex = LocalExecutor(tmp_path)
    ex.launch(JobSpec(key="k", argv=["true"]))
    with pytest.raises(ToolError, match="different job"):
        ex.launch(JobSpec(key="k", argv=["false"]))


def test_timeout_ends_the_whole_process_group(tmp_path: Path):
    ex = LocalExecutor(tmp_path)
    pidfile = tmp_path / "grandchild.pid"
    timeout_s = limit(2)  # wall clock from the wrapper's start: room for the command to write its pidfile
    ex.launch(JobSpec(key="slow", argv=["bash", "-c", f"sleep 60 & echo $! > {pidfile}; wait"],
                      timeout_s=timeout_s, grace_s=0.5))
    state = wait_done(ex, "slow")
    assert state.status == "timed_out" and f"{timeout_s:g} s" in state.reason
    grandchild = int(pidfile.read_text())
    # start_time is None once it is gone or a zombie (killed, awaiting its parent's wait)
    wait_for(lambda: processes.start_time(grandchild) is None, 10, "the killed grandchild to go")


def test_stop_escalates_to_sigkill_when_term_is_ignored(tmp_path: Path):
    ex = LocalExecutor(tmp_path)
    ex.launch(JobSpec(key="stubborn", argv=["bash", "-c", "trap '' TERM; while true; do sleep 0.1; done"], grace_s=0.3))
    launched = wait_for(lambda: (s := ex.poll("stubborn")).child_pgid and s, 30, "the wrapper's record")
    time.sleep(0.3)
    state = ex.stop("stubborn")  # returns only once the group is gone: a missing SIGKILL hangs here
    assert state.status == "stopped"
    assert launched.child_pgid and not _live_in_group(launched.child_pgid)
    assert (tmp_path / "stubborn" / "stop.json").exists()


def _live_in_group(pgid: int) -> list[int]:
    """Pids of processes in this process group that are not zombies."""
    live = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it ended while we looked
        if int(fields[2]) == pgid and fields[0] != "Z":
            live.append(int(stat.parent.name))
    return live


def test_job_survives_the_agent_process_dying(tmp_path: Path):
    """A job launched by an agent that is then SIGKILLed keeps running and is re-attached."""
    go = tmp_path / "go"  # the job runs until the test lets it end
    argv = ["bash", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done"]
    script = (f"import sys; sys.path.insert(0, {str(Path(__file__).parents[1])!r});"
              "from tools.jobs import LocalExecutor, JobSpec;"
              f"LocalExecutor({str(tmp_path)!r}).launch(JobSpec(key='orphan', argv={argv!r}));"
              "import time; time.sleep(30)")
    agent = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + limit(10)
    while not (tmp_path / "orphan" / "wrapper.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    agent.kill()
    agent.wait()
    ex = LocalExecutor(tmp_path)
    assert ex.poll("orphan").status == "running"
    go.touch()
    assert wait_done(ex, "orphan").status == "succeeded"


def test_a_recycled_pid_is_not_mistaken_for_our_job(tmp_path: Path):
    ex = LocalExecutor(tmp_path)
    ex.launch(JobSpec(key="short", argv=["true"]))
    wait_done(ex, "short")
    # Forge a ledger that points at a live process we did not start (our own test process).
    folder = tmp_path / "short"
    (folder / "exit.json").unlink()
    (folder / "command_exit.json").unlink()  # no exit recorded anywhere: only the forged pid remains
    launch = json.loads((folder / "launch.json").read_text())
    launch.update(pid=os.getpid(), start_time="1")  # wrong start time: not the process we launched
    (folder / "launch.json").write_text(json.dumps(launch))
    (folder / "wrapper.json").write_text(json.dumps({"pid": os.getpid(), "child_pgid": None}))
    state = ex.poll("short")
    assert state.status == "lost"
    # Had stop() signalled the forged pid, this test process would have died of SIGTERM here.
    assert ex.stop("short").status in ("lost", "stopped")


def test_a_missing_program_is_a_failed_job_with_a_message(tmp_path: Path):
    ex = LocalExecutor(tmp_path)
    ex.launch(JobSpec(key="nope", argv=["/nonexistent/tool", "x"]))
    state = wait_done(ex, "nope")
    assert state.status == "failed" and state.exit_code == 127
    assert "could not start '/nonexistent/tool'" in ex.read_log("nope")


def test_unknown_job_and_bad_key(tmp_path: Path):
    with pytest.raises(ToolError, match="no job 'ghost'"):
        LocalExecutor(tmp_path).poll("ghost")
    with pytest.raises(ValueError, match="names a folder"):
        JobSpec(key="../escape", argv=["true"])


def test_jobs_lists_every_ledger_entry(tmp_path: Path):
    ex = LocalExecutor(tmp_path)
    for key in ("a", "b"):
        ex.launch(JobSpec(key=key, argv=["true"], kind="tune", gpus=[0]))
    for key in ("a", "b"):
        wait_done(ex, key)
    listed = ex.jobs()
    assert [j.key for j in listed] == ["a", "b"] and all(j.kind == "tune" and j.gpus == [0] for j in listed)


def test_sigterm_to_agent_group_does_not_reach_jobs(tmp_path: Path):
    """Jobs live in their own session: a signal to the agent's process group spares them."""
    ex = LocalExecutor(tmp_path)
    go = tmp_path / "go"  # the job runs until the test lets it end
    ex.launch(JobSpec(key="own-session", argv=["bash", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done"]))
    state = wait_for(lambda: (s := ex.poll("own-session")).child_pgid and s, 30, "the wrapper's record")
    assert os.getpgid(state.pid) != os.getpgid(0)
    assert os.getpgid(state.child_pgid) == state.child_pgid != os.getpgid(0)
    go.touch()
    assert wait_done(ex, "own-session").status == "succeeded"
