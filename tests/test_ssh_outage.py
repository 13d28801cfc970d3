"""An SSH host that answered and then goes away is waited out (a line per retry), named past the
bound, and never asked to launch twice; a host never reached fails at once.

Real OpenSSH: an sshd of this module's own (tests/services/start_sshd.sh, a port of its own) is
taken down whole, its listener and every connection it serves, as a reboot or a dropped network
would, and started again. The jobs it started are detached and run on through it.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import threading

import pytest

from tests.cli_helpers import AGENT, clean_env
from tests.conftest import require_binary
from tests.messages import message_naming
from tests.own_sshd import SERVICES, OwnSshd
from tests.slowdown import limit, wait_for
from tools.base import ToolError
from tools.jobs.executor import free_local_port
from tools.jobs.outages import OutageWait, Unreachable
from tools.jobs.spec import JobSpec
from tools.jobs.ssh.executor import SshExecutor
from tools.jobs.ssh.transport import classify_ssh_failure


def _free_port() -> int:
    return free_local_port()  # outside the ephemeral range: no client connection takes it meanwhile


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    require_binary("ssh")
    require_binary("sshd")
    services = tmp_path_factory.mktemp("own-sshd")
    own = OwnSshd({**os.environ, "DSV4_SERVICES_DIR": str(services), "DSV4_SSHD_PORT": str(_free_port())},
                  services / "sshd")
    own.start()
    yield own
    subprocess.run([str(SERVICES / "stop_sshd.sh")], env=own.env, capture_output=True, timeout=limit(60))


@pytest.fixture
def executor(sshd, tmp_path):
    made: list[SshExecutor] = []

    def make(outage: OutageWait) -> SshExecutor:
        made.append(SshExecutor("ssh://dsv4-test", tmp_path / "run" / "jobs", ssh_options=sshd.options, outage=outage))
        return made[-1]

    yield make
    if not (sshd.base / "sshd.pid").exists():
        sshd.start()
    for ex in made:  # the host is this machine as this user: its run folders are not the suite's to keep
        sshd.ssh(f"rm -rf -- {shlex.quote(ex.remote_run)}")


def test_a_poll_waits_out_an_ssh_host_that_went_away_and_the_job_runs_through(sshd, executor, tmp_path):
    said: list[str] = []
    retrying = threading.Event()
    ex = executor(OutageWait(total_s=limit(120), notify=lambda line: (said.append(line), retrying.set())))
    go = "go"
    ex.launch(JobSpec(key="held", argv=["bash", "-c", f"while [ ! -e {go} ]; do sleep 0.1; done; echo done"]))
    wait_for(lambda: ex.poll("held").status == "running", 60, "the job to run")
    polled: list = []
    sshd.take_down()
    try:
        poller = threading.Thread(target=lambda: polled.append(ex.poll("held")))
        poller.start()
        assert retrying.wait(limit(60)), "no retry was announced"
    finally:
        sshd.start()
    poller.join(limit(120))
    assert not poller.is_alive() and polled and polled[0].status == "running", (polled, said)
    assert said[0].startswith("ssh://dsv4-test does not answer `poll`; retry 1 in"), said
    assert said[-1].endswith("answered again after %d retries" % (len(said) - 1)), said
    assert sshd.ssh(f"touch {ex.remote_root}/held/go").returncode == 0
    done = wait_for(lambda: (s := ex.poll("held")).done and s, 60, "the job to end")
    assert done.status == "succeeded" and "done" in (ex.job_dir("held") / "log.txt").read_text()


def test_past_the_bound_one_line_names_the_host_and_the_outage_keeps_one_window(sshd, executor, tmp_path):
    said: list[str] = []
    ex = executor(OutageWait(total_s=1, notify=said.append))
    ex.launch(JobSpec(key="first", argv=["true"]))  # the host has answered
    sshd.take_down()
    with pytest.raises(ToolError) as err:
        ex.poll("first")
    message = str(err.value)
    assert "\n" not in message and message.startswith("ssh://dsv4-test did not answer `poll` for 1 s"), message
    assert "`ssh dsv4-test true`" in message and "`dsv4-agent resume RUN`" in message, message
    assert said and all("retry" in line for line in said), said

    said.clear()
    with pytest.raises(ToolError, match=r"^ssh://dsv4-test did not answer `launch` for 1 s"):
        ex.launch(JobSpec(key="second", argv=["true"]))  # the same outage: its window is spent
    assert said == []
    sshd.start()
    assert ex.poll("first").done and not (ex.job_dir("second") / "job.json").exists()


def test_a_launch_waits_out_a_host_that_refuses_connections_and_starts_the_job_once(sshd, executor):
    said: list[str] = []
    retrying = threading.Event()
    ex = executor(OutageWait(total_s=limit(120), notify=lambda line: (said.append(line), retrying.set())))
    ex.launch(JobSpec(key="first", argv=["true"]))  # the host has answered
    sshd.take_down()
    launched: list = []
    try:
        launcher = threading.Thread(target=lambda: launched.append(ex.launch(JobSpec(key="second", argv=["true"]))))
        launcher.start()
        assert retrying.wait(limit(60)), "no retry was announced"
    finally:
        sshd.start()
    launcher.join(limit(120))
    assert not launcher.is_alive() and launched and not launched[0].attached, (launched, said)
    assert said[0].startswith("ssh://dsv4-test does not answer `launch`; retry 1 in"), said
    assert wait_for(lambda: (s := ex.poll("second")).done and s, 60, "the job to end").status == "succeeded"
    assert sorted(state.key for state in ex.jobs()) == ["first", "second"]


def test_a_host_never_reached_fails_at_once(tmp_path):
    require_binary("ssh")
    said: list[str] = []
    ex = SshExecutor(f"ssh://127.0.0.1:{_free_port()}", tmp_path / "run" / "jobs", outage=OutageWait(notify=said.append),
                     ssh_options=["-F", "/dev/null", "-o", f"UserKnownHostsFile={tmp_path / 'kh'}"])
    with pytest.raises(ToolError, match="unreachable: check the host name and port"):
        ex.detect_gpus()
    assert said == []  # a wrong name or port is not an outage


def test_jobs_waits_out_the_outage_with_a_line_per_retry_on_stderr(sshd, executor, tmp_path):
    ex = executor(OutageWait())
    ex.launch(JobSpec(key="tune-gpu0", argv=["true"]))
    wait_for(lambda: ex.poll("tune-gpu0").done, 60, "the job to end")
    run = tmp_path / "run"
    (run / "config.json").write_text(json.dumps({"goal": "tune kernels", "settings": {"executor": "ssh://dsv4-test"}}))
    sshd.take_down()
    listing = subprocess.Popen([AGENT, "jobs", str(run), "--executor", "ssh://dsv4-test",  # the host is the user's
                                *(f"--ssh-option={o}" for o in sshd.options)], cwd=tmp_path,
                               env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = listing.stderr.readline()  # blocks until the first retry line (or the exit)
    finally:
        sshd.start()
    out, rest = listing.communicate(timeout=limit(180))
    message_naming(first, "ssh://dsv4-test", "`list`", "retry 1")
    assert listing.returncode == 0 and "tune-gpu0" in out and "succeeded" in out, out + first + rest
    assert rest.splitlines()[-1].endswith("answered again after %d retries" % (len(rest.splitlines()))), rest


def test_a_call_cut_off_on_the_shared_connection_ends_255_without_a_word_and_is_no_answer(sshd, executor):
    """OpenSSH's own behaviour, on which the classification rests: a call in flight through the shared
    connection (multiplex.py) when sshd's connections go ends with exit 255 and an empty stderr."""
    ex = executor(OutageWait())
    ex.launch(JobSpec(key="first", argv=["true"]))  # the host has answered: the shared connection is up
    assert ex.shared_connection, "the calls are not on a shared connection"
    call = subprocess.Popen([*ex._ssh_prefix(), "--", ex.destination, "echo started; read -r _"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert call.stdout.readline() == b"started\n"  # the session runs on the host
    sshd.take_down()
    _, stderr = call.communicate(timeout=limit(30))
    assert call.returncode == 255 and stderr == b"", (call.returncode, stderr)
    cut = classify_ssh_failure(ex.url, "", shared=True)
    assert isinstance(cut, Unreachable) and not cut.unsent  # it went out: a launch is not sent again
    alone = classify_ssh_failure(ex.url, "", shared=False)  # a connection of its own says why it ended
    assert not isinstance(alone, Unreachable) and "failed without a message" in str(alone)
    refused = subprocess.run([*ex._ssh_prefix(), "--", ex.destination, "true"], capture_output=True, text=True,
                             timeout=limit(30))  # the master is gone with its connection: ssh connects afresh
    assert refused.returncode == 255, refused
    fresh = classify_ssh_failure(ex.url, refused.stderr, shared=True)
    assert isinstance(fresh, Unreachable) and fresh.unsent, refused.stderr  # nothing went out


def test_one_window_per_outage_not_one_per_call():
    said: list[str] = []
    outage = OutageWait(total_s=1, notify=said.append)

    def no_answer():
        raise Unreachable("no answer", "ssh://host", "check it")

    with pytest.raises(ToolError, match="did not answer `poll` for 1 s"):
        outage.call("`poll`", no_answer)
    assert said, "the first call waited without a word"
    said.clear()
    with pytest.raises(ToolError, match="did not answer `list` for 1 s"):
        outage.call("`list`", no_answer)  # the same outage: its window is spent, no second one opens
    assert said == []
    assert outage.call("`poll`", lambda: "answered") == "answered"  # the outage ended
    with pytest.raises(ToolError):
        outage.call("`poll`", no_answer)
    assert said, "an outage after an answer did not get a window of its own"
