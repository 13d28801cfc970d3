"""The SSH executor's ledger calls share one connection to the host (tools/jobs/ssh/multiplex.py);
its port forwards never do.

Against a real sshd of the test's own (tests/services/start_sshd.sh on a free port), so the test can
stop its listener: after that, only a call that rides on the connection already made can reach the
host. The folder checks need no sshd."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import require_binary
from tests.slowdown import limit
from tools.base import ToolError
from tools.jobs.executor import free_local_port
from tools.jobs.spec import JobSpec
from tools.jobs.ssh.executor import SshExecutor
from tools.jobs.ssh.multiplex import MAX_SOCKET_PATH, shared_options

SERVICES = Path(__file__).parent / "services"


@pytest.fixture
def runtime_dir(monkeypatch):
    """A short XDG_RUNTIME_DIR of the test's own (the suite's tmp_path is too long for a socket path)."""
    folder = Path(tempfile.mkdtemp(prefix="mx"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def own_sshd(tmp_path):
    require_binary("ssh")
    require_binary("sshd")
    env = {**os.environ, "DSV4_SERVICES_DIR": str(tmp_path / "services"), "DSV4_SSHD_PORT": str(free_local_port())}
    subprocess.run([str(SERVICES / "start_sshd.sh")], env=env, check=True, capture_output=True, timeout=limit(60))
    yield tmp_path / "services" / "sshd", env
    subprocess.run([str(SERVICES / "stop_sshd.sh")], env=env, check=True, capture_output=True, timeout=limit(60))


def _ssh(config: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ssh", "-F", str(config), *args], capture_output=True, text=True, timeout=limit(30))


def test_ledger_calls_ride_one_connection_and_a_forward_gets_its_own(own_sshd, runtime_dir, tmp_path):
    base, env = own_sshd
    config = base / "ssh_config"
    ex = SshExecutor("ssh://dsv4-test", tmp_path / "run" / "jobs", ssh_options=["-F", str(config)])
    ex.free_port()  # the first call connects, and stays as the master
    [control] = list((runtime_dir / "dsv4-agent-ssh").iterdir())
    assert stat.S_ISSOCK(control.lstat().st_mode)
    assert stat.S_IMODE((runtime_dir / "dsv4-agent-ssh").stat().st_mode) == 0o700
    try:
        assert _ssh(config, "-o", f"ControlPath={control}", "-O", "check", "dsv4-test").returncode == 0

        subprocess.run([str(SERVICES / "stop_sshd.sh")], env=env, check=True, capture_output=True, timeout=limit(60))
        refused = _ssh(config, "-o", "ControlPath=none", "dsv4-test", "true")
        assert refused.returncode == 255 and "refused" in refused.stderr  # nobody listens any more

        state = ex.launch(JobSpec(key="held", argv=["sleep", "60"]))  # yet the ledger calls still reach the host
        assert state.status == "running" and [s.key for s in ex.jobs()] == ["held"]
        with pytest.raises(ToolError, match=r"port forward .* exited \(255\).*refused"):
            ex.forward("held", "127.0.0.1", ex.free_port())  # a connection of its own: refused
        assert ex.stop("held", grace_s=1).done
    finally:
        _ssh(config, "-o", f"ControlPath={control}", "dsv4-test", "rm", "-rf", "--", ex.remote_run)
        _ssh(config, "-o", f"ControlPath={control}", "-O", "exit", "dsv4-test")


def test_the_socket_name_separates_hosts_ports_and_options(runtime_dir):
    plain = shared_options("gpu-box", None, ["-F", "cfg"])
    path = plain[plain.index("-o", 2) + 1]
    assert plain[:2] == ["-o", "ControlMaster=auto"] and "ControlPersist=60" in plain
    assert path.startswith(f"ControlPath={runtime_dir / 'dsv4-agent-ssh'}/")
    assert shared_options("gpu-box", None, ["-F", "cfg"]) == plain  # the same call finds the same connection
    others = [shared_options("gpu-box", 2222, ["-F", "cfg"]), shared_options("other-box", None, ["-F", "cfg"]),
              shared_options("gpu-box", None, ["-F", "cfg", "-i", "another_key"])]
    assert len({o[o.index("-o", 2) + 1] for o in others} | {path}) == 4


@pytest.mark.parametrize("setting", ["ControlMaster=no", "controlpath=none", "ControlPersist=5"])
def test_control_options_the_user_gives_are_left_alone(runtime_dir, setting):
    assert shared_options("gpu-box", None, ["-o", setting]) == []


def test_a_folder_others_can_enter_or_a_link_is_not_used(runtime_dir, tmp_path):
    folder = runtime_dir / "dsv4-agent-ssh"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    assert shared_options("gpu-box", None, []) == []
    folder.rmdir()
    elsewhere = tmp_path / "private"
    elsewhere.mkdir(mode=0o700)
    folder.symlink_to(elsewhere)
    assert shared_options("gpu-box", None, []) == []
    assert list(elsewhere.iterdir()) == []


def test_a_socket_path_ssh_cannot_use_means_connections_of_their_own(monkeypatch, tmp_path):
    deep = tmp_path / ("d" * (MAX_SOCKET_PATH - len(str(tmp_path))))
    deep.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    assert shared_options("gpu-box", None, []) == []
    spaced = Path(tempfile.mkdtemp(prefix="mx 50% "))
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(spaced))
        assert shared_options("gpu-box", None, []) == []
    finally:
        shutil.rmtree(spaced)
