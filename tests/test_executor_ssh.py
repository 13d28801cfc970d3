"""SshExecutor against a real OpenSSH server on loopback (tests/services/start_sshd.sh).

No doubles: the executor drives the system ``ssh`` into a real ``sshd`` that runs the jobs on
this machine as if it were the GPU host. If CI already started the server (pid file under
/tmp/dsv4-test-services), it is reused; otherwise the session starts its own on a free port and
stops it at the end, by its pid file.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import require_binary, service_running
from tests.slowdown import limit, until_accepted, wait_for
from tools.base import ToolError
from tools.jobs.executor import free_local_port
from tools.jobs.factory import make_executor
from tools.jobs.local import LocalExecutor
from tools.jobs.spec import JobSpec
from tools.jobs.ssh.executor import POLL_WAIT_S, SshExecutor

SERVICES = Path(__file__).parent / "services"
REPO = Path(__file__).parent.parent


@dataclass
class Sshd:
    base: Path
    port: int

    @property
    def options(self) -> list[str]:
        return ["-F", str(self.base / "ssh_config")]

    def ssh(self, command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["ssh", *self.options, "dsv4-test", command], capture_output=True, text=True, timeout=limit(30))


def _free_port() -> int:
    return free_local_port()  # outside the ephemeral range: no client connection takes it meanwhile




@pytest.fixture(scope="session")
def sshd(tmp_path_factory) -> Sshd:
    require_binary("ssh")
    shared = Path("/tmp/dsv4-test-services/sshd")
    if service_running(shared / "sshd.pid"):
        yield Sshd(shared, int(os.environ.get("DSV4_SSHD_PORT", "2222")))
        return
    require_binary("sshd")
    services_dir = tmp_path_factory.mktemp("services")
    env = {**os.environ, "DSV4_SERVICES_DIR": str(services_dir), "DSV4_SSHD_PORT": str(_free_port())}
    subprocess.run([str(SERVICES / "start_sshd.sh")], env=env, check=True, capture_output=True, timeout=limit(60))
    yield Sshd(services_dir / "sshd", int(env["DSV4_SSHD_PORT"]))
    subprocess.run([str(SERVICES / "stop_sshd.sh")], env=env, check=True, capture_output=True, timeout=limit(60))


_MADE: list[tuple[Sshd, SshExecutor]] = []


def _executor(sshd: Sshd, jobs_root: Path) -> SshExecutor:
    executor = SshExecutor("ssh://dsv4-test", jobs_root, ssh_options=sshd.options)
    _MADE.append((sshd, executor))
    return executor


@pytest.fixture(autouse=True)
def remote_runs_removed():
    """The "host" is this machine as this user: each run's folder there (``~/.dsv4-agent/runs/...``)
    is removed after the test, as the user's home is not the suite's to fill."""
    yield
    while _MADE:
        sshd, executor = _MADE.pop()
        assert executor.remote_run.startswith(".dsv4-agent/runs/run-"), executor.remote_run
        sshd.ssh(f"rm -rf -- {shlex.quote(executor.remote_run)}")


def _wait(executor, key: str, until, timeout_s: float = 30.0):
    deadline = time.monotonic() + limit(timeout_s)
    while time.monotonic() < deadline:
        state = executor.poll(key)
        if until(state):
            return state
        time.sleep(0.2)
    raise AssertionError(f"job {key} did not reach the expected state; last: {state}")


def test_job_runs_detached_and_its_log_and_results_come_back(sshd, tmp_path):
    ex = _executor(sshd, tmp_path / "run-a" / "jobs")
    script = "echo first; while [ ! -e go ]; do sleep 0.1; done; echo second; echo '{\"m\": 1}' > result.json"
    state = ex.launch(JobSpec(key="tune-gpu0", argv=["bash", "-c", script], env={"X": "1"}))
    assert state.status == "running" and not state.attached

    # the log is mirrored while the job runs, before any result exists
    state = _wait(ex, "tune-gpu0", lambda s: "first" in (ex.job_dir("tune-gpu0") / "log.txt").read_text())
    assert state.status == "running"
    assert not (ex.job_dir("tune-gpu0") / "result.json").exists()

    assert sshd.ssh(f"touch {ex.remote_root}/tune-gpu0/go").returncode == 0
    state = _wait(ex, "tune-gpu0", lambda s: s.done)
    assert state.status == "succeeded" and state.exit_code == 0
    log = (ex.job_dir("tune-gpu0") / "log.txt").read_text()
    assert log.count("first") == 1 and log.count("second") == 1  # appended, never duplicated
    assert json.loads((ex.job_dir("tune-gpu0") / "result.json").read_text()) == {"m": 1}
    assert json.loads((ex.job_dir("tune-gpu0") / "exit.json").read_text())["exit_code"] == 0
    assert "second" in ex.read_log("tune-gpu0", max_chars=100)
    # the ledger lives on the remote, where the job ran
    assert sshd.ssh(f"test -f {ex.remote_root}/tune-gpu0/exit.json").returncode == 0


def test_a_poll_watches_a_running_job_on_the_host_instead_of_calling_again(sshd, tmp_path):
    """Every caller polls in a loop; each ssh call is a connection, a login shell and a Python on both
    ends. A poll of a job that plainly runs is one call that watches the host's ledger for the poll's
    wait; a listing (``jobs``) and a log read answer at once; a job that ends is still seen ending."""
    ex = _executor(sshd, tmp_path / "run-w" / "jobs")
    ex.launch(JobSpec(key="watched", argv=["bash", "-c", "while [ ! -e go ]; do sleep 0.05; done"]))
    _wait(ex, "watched", lambda s: s.status == "running")
    began = time.monotonic()
    assert ex.poll("watched").status == "running"
    assert time.monotonic() - began >= POLL_WAIT_S  # watched on the host, not answered and asked again
    assert [s.status for s in ex.jobs()] == ["running"] and ex.read_log("watched") == ""
    assert sshd.ssh(f"touch {ex.remote_root}/watched/go").returncode == 0
    assert _wait(ex, "watched", lambda s: s.done).status == "succeeded"


def test_failing_job_reports_its_exit_code(sshd, tmp_path):
    ex = _executor(sshd, tmp_path / "run-b" / "jobs")
    ex.launch(JobSpec(key="bad", argv=["bash", "-c", "echo broken >&2; exit 3"]))
    state = _wait(ex, "bad", lambda s: s.done)
    assert (state.status, state.exit_code, state.reason) == ("failed", 3, "exit code 3")
    assert "broken" in ex.read_log("bad")
    ex.launch(JobSpec(key="nothing", argv=["/no/such/program"]))
    assert _wait(ex, "nothing", lambda s: s.done).exit_code == 127


def test_stop_ends_the_remote_process_group(sshd, tmp_path):
    ex = _executor(sshd, tmp_path / "run-c" / "jobs")
    ex.launch(JobSpec(key="serve", argv=["bash", "-c", "sleep 300 & sleep 301; wait"], grace_s=1))
    state = wait_for(lambda: (s := ex.poll("serve")).child_pgid and s, 60, "the wrapper's record on the host")
    assert state.status == "running"
    stopped = ex.stop("serve")
    assert stopped.status == "stopped"
    # nothing of the job's process group is left on the host (zombies awaiting init's reaping
    # are already dead, so only live states count)
    deadline = time.monotonic() + limit(5)
    while True:
        listing = sshd.ssh(f"ps -o stat= -o pid= --sid {state.child_pgid}").stdout.split("\n")
        live = [line for line in listing if line.strip() and not line.strip().startswith("Z")]
        if not live or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert live == []
    assert ex.stop("serve").status == "stopped"  # stopping again is harmless


def test_agent_killed_and_restarted_reattaches_instead_of_starting_again(sshd, tmp_path):
    jobs_root = tmp_path / "run-d" / "jobs"
    marker = "job-start-marker"
    # runs until the test lets it end (a file in its folder on the host), however slow the machine
    argv = ["bash", "-c", f"echo {marker}; while [ ! -e go ]; do sleep 0.05; done; echo finished"]
    agent_code = textwrap.dedent(f"""
        import json, sys, time
        from tools.jobs.ssh.executor import POLL_WAIT_S, SshExecutor
        from tools.jobs.spec import JobSpec
        ex = SshExecutor("ssh://dsv4-test", {str(jobs_root)!r}, ssh_options={sshd.options!r})
        state = ex.launch(JobSpec(key="long", argv={argv!r}))
        print(json.dumps({{"pid": state.pid, "status": state.status}}), flush=True)
        time.sleep(600)
    """)
    agent = subprocess.Popen([sys.executable, "-c", agent_code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    first = json.loads(agent.stdout.readline())
    agent.send_signal(signal.SIGKILL)  # the agent dies hard; the remote job must not notice
    agent.wait()
    assert first["status"] == "running"

    ex = _executor(sshd, jobs_root)  # a new agent on the same run folder
    again = ex.launch(JobSpec(key="long", argv=argv))
    assert again.attached and again.pid == first["pid"]
    assert sshd.ssh(f"touch {ex.remote_root}/long/go").returncode == 0
    done = _wait(ex, "long", lambda s: s.done)
    assert done.status == "succeeded"
    assert ex.read_log("long").count(marker) == 1
    # launching a finished key again re-attaches too: the job is not re-run
    assert ex.launch(JobSpec(key="long", argv=argv)).attached
    assert ex.read_log("long").count(marker) == 1
    assert [j.key for j in ex.jobs()] == ["long"]
    with pytest.raises(ToolError, match="different job"):
        ex.launch(JobSpec(key="long", argv=["true"]))


def test_wrapper_killed_on_the_host_is_reported_lost(sshd, tmp_path):
    ex = _executor(sshd, tmp_path / "run-e" / "jobs")
    state = ex.launch(JobSpec(key="victim", argv=["sleep", "300"]))
    assert sshd.ssh(f"kill -9 {state.pid}; kill -9 -{state.child_pgid}").returncode == 0
    lost = _wait(ex, "victim", lambda s: s.done)
    assert lost.status == "lost" and "without recording an exit" in lost.reason


def test_unreachable_host_is_a_clear_error(tmp_path):
    require_binary("ssh")
    ex = SshExecutor(f"ssh://127.0.0.1:{_free_port()}", tmp_path / "run-f" / "jobs",
                     ssh_options=["-F", "/dev/null", "-o", "StrictHostKeyChecking=no",
                                  "-o", f"UserKnownHostsFile={tmp_path / 'kh'}"])
    with pytest.raises(ToolError, match="unreachable: check the host name and port"):
        ex.launch(JobSpec(key="x", argv=["true"]))


def test_wrong_key_is_permission_denied(sshd, tmp_path):
    key = tmp_path / "wrong_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    ex = SshExecutor(f"ssh://{os.environ.get('USER') or 'root'}@127.0.0.1:{sshd.port}", tmp_path / "run-g" / "jobs",
                     ssh_options=["-F", "/dev/null", "-i", str(key), "-o", "IdentitiesOnly=yes",
                                  "-o", "IdentityAgent=none", "-o", "StrictHostKeyChecking=no",
                                  "-o", f"UserKnownHostsFile={tmp_path / 'kh'}"])
    with pytest.raises(ToolError, match="refused our keys"):
        ex.launch(JobSpec(key="x", argv=["true"]))


def test_run_folder_remembers_its_host(sshd, tmp_path):
    jobs_root = tmp_path / "run-h" / "jobs"
    first = _executor(sshd, jobs_root)
    assert _executor(sshd, jobs_root).remote_root == first.remote_root
    with pytest.raises(ToolError, match="resume with that --executor"):
        SshExecutor("ssh://other-host", jobs_root)


def test_factory_names_every_accepted_form(sshd, tmp_path):
    assert isinstance(make_executor("local", tmp_path / "l"), LocalExecutor)
    assert isinstance(make_executor("ssh://dsv4-test", tmp_path / "s" / "jobs", ssh_options=sshd.options), SshExecutor)
    with pytest.raises(ToolError, match=r"ssh://user@host\[:port\].*slurm:PARTITION"):
        make_executor("kubernetes", tmp_path / "k")
    with pytest.raises(ToolError, match="ssh://user@host"):
        make_executor("ssh://", tmp_path / "k")


def test_a_python_found_by_name_is_started_by_that_name_once(sshd, tmp_path, monkeypatch):
    """The host's ``python3`` is found through its PATH (here pyenv's shims: a chain of shell scripts)
    once; it answers with its own path, and later calls start that path directly. Seen through an
    ``ssh`` first on our PATH that notes each call's remote program and hands over to the real one."""
    real_ssh = shutil.which("ssh")
    notes = tmp_path / "remote-programs.txt"
    ours = tmp_path / "bin"
    ours.mkdir()
    (ours / "ssh").write_text(f'#!/bin/bash\nfor last; do :; done\nprintf "%s\\n" "${{last%% *}}" >> {shlex.quote(str(notes))}\n'
                              f'exec {shlex.quote(real_ssh)} "$@"\n')
    (ours / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{ours}{os.pathsep}{os.environ['PATH']}")
    ex = _executor(sshd, tmp_path / "run-p" / "jobs")
    assert ex.jobs() == [] and ex.free_port() > 0 and ex.launch(JobSpec(key="quick", argv=["true"])).key == "quick"
    first, *later = notes.read_text().splitlines()
    resolved = sshd.ssh("python3 -c 'import sys; print(sys.executable)'").stdout.strip()
    assert first == "python3" and len(later) >= 2 and set(later) == {shlex.quote(resolved)}
    assert ex.remote_python == resolved and os.path.isabs(resolved)


def test_a_job_whose_folder_on_the_host_was_deleted_is_found_and_never_started_twice(sshd, tmp_path):
    """``jobs/<key>/`` removed on the host while the job runs: a new agent's launch of that key finds
    its processes there (DSV4_JOB_DIR in their environment; once only a process that cleared it is
    left, the recorded process group and the job's token) and refuses, naming them; once they have
    ended, the key starts afresh."""
    starts, go, ready = tmp_path / "starts.txt", tmp_path / "go", tmp_path / "ready"
    inner = f"touch {ready}; while [ ! -e {go} ]; do sleep 0.05; done"
    spec = JobSpec(key="tune-gpu0", argv=["bash", "-c", f"echo start >> {starts}; exec env -u DSV4_JOB_DIR "
                                                        f"bash -c {shlex.quote(inner)}"])
    jobs_root = tmp_path / "run-g" / "jobs"
    ex = _executor(sshd, jobs_root)
    ex.launch(spec)
    try:
        # "running" comes before the leader has read job.json: a folder deleted then leaves no command.
        # `ready` is touched once the command has replaced itself with the one that cleared DSV4_JOB_DIR.
        wait_for(ready.exists, 60, "the command to begin")
        _refused_while_its_processes_run(sshd, jobs_root, spec, ex.poll("tune-gpu0"), starts)
    finally:
        go.touch()  # the orphan ends (the test's own processes, whatever failed)
    ex = _executor(sshd, jobs_root)  # the key is started again, once
    again = until_accepted(lambda: ex.launch(spec), "not started a second time", 30, "the orphan's processes to end")
    assert not again.attached and _wait(ex, "tune-gpu0", lambda s: s.done).status == "succeeded"
    assert starts.read_text() == "start\nstart\n"


def _refused_while_its_processes_run(sshd, jobs_root, spec, first, starts):
    assert first.status == "running" and first.child_pgid
    assert sshd.ssh(f"rm -rf -- {_executor(sshd, jobs_root).remote_root}/tune-gpu0").returncode == 0

    with pytest.raises(ToolError) as refused:  # a new agent: the wrapper and leader carry DSV4_JOB_DIR
        _executor(sshd, jobs_root).launch(spec)
    said = str(refused.value)
    assert "not started a second time" in said and "ssh://dsv4-test" in said and f"-{first.child_pgid}" in said
    assert str(first.pid) in said and "DSV4_JOB_DIR" in said

    # the wrapper and the leader killed: only the command is left, without DSV4_JOB_DIR but with the token
    assert sshd.ssh(f"kill -9 {first.pid} {first.child_pgid}").returncode == 0
    with pytest.raises(ToolError, match=f"process group {first.child_pgid}.*job's token") as refused:
        _executor(sshd, jobs_root).launch(spec)
    assert str(first.pid) not in str(refused.value).split("pids ")[1].split(";")[0]
    assert starts.read_text() == "start\n"
