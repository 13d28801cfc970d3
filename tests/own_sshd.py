"""A private OpenSSH server on loopback that a test can take down whole and start again.

tests/services/start_sshd.sh starts it (own port, keys, config); ``take_down`` ends its listener
and every connection it serves (its children), each by pid and start time, as a reboot or a
dropped network would; ``start`` brings it back on the same port and keys.
"""
from __future__ import annotations

import contextlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.own_processes import OwnPid
from tests.slowdown import limit, wait_for
from tools.jobs import processes

SERVICES = Path(__file__).parent / "services"


@dataclass
class OwnSshd:
    env: dict[str, str]
    base: Path  # start_sshd.sh's folder: sshd.pid, ssh_config, keys

    @property
    def options(self) -> list[str]:
        return ["-F", str(self.base / "ssh_config")]

    def start(self) -> None:
        subprocess.run([str(SERVICES / "start_sshd.sh")], env=self.env, check=True, capture_output=True,
                       timeout=limit(60))

    def stop(self) -> None:
        subprocess.run([str(SERVICES / "stop_sshd.sh")], env=self.env, capture_output=True, timeout=limit(60))

    def take_down(self) -> None:
        """The listener and the connections it serves (its children), each by pid and start time."""
        listener = OwnPid(int((self.base / "sshd.pid").read_text()))
        sessions = [OwnPid(pid) for pid in _children(listener.pid)]
        for own in [listener, *sessions]:
            own.kill()
        wait_for(lambda: all(processes.start_time(o.pid) != o.start for o in [listener, *sessions]), 30,
                 "sshd and its connections to end")
        (self.base / "sshd.pid").unlink(missing_ok=True)

    def ssh(self, command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["ssh", *self.options, "dsv4-test", command], capture_output=True, text=True,
                              timeout=limit(30))


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found
