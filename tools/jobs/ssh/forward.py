"""An ``ssh -L`` local port forward to a server job on the SSH host, owned by the agent.

Why: a benchmark server runs on the GPU host and listens on the host's loopback; readiness probes
and the accept-length snapshots (``/health``, ``/server_info``, ``/metrics``) are made by the agent,
so they go through ``ssh -N -L 127.0.0.1:LOCAL:HOST:PORT`` started here in a process group of its
own. Only that group is ever signalled. Its pid and kernel start time are kept in
``<job folder>/forward.json`` so that, after the agent was killed, the next forward for the same
job ends the stale one it left behind (and nothing else: a reused pid has another start time, and
a pid and start time copied into a forged record lack the token the forward was started with).
"""
from __future__ import annotations

import contextlib
import json
import secrets
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from tools.base import ToolError
from tools.child_env import child_env
from tools.jobs.processes import TOKEN_VARIABLE, free_port, is_process

FORWARD_WAIT_S = 20.0


def _local_port() -> int:
    return free_port("127.0.0.1")


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] == "Z" else fields[19]


def _end_group(pid: int, proc: subprocess.Popen | None = None) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if proc is not None:
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            pass  # still there: killed below
    else:
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    if proc is not None:
        proc.wait()


class PortForward:
    """``127.0.0.1:local_port`` here reaches ``remote_host:remote_port`` as seen from the SSH host."""

    def __init__(self, ssh_prefix: list[str], destination: str, remote_host: str, remote_port: int, folder: Path):
        self.remote_host, self.remote_port = remote_host, remote_port
        self.folder = folder
        self.record = folder / "forward.json"
        self._end_stale()
        self.local_port = _local_port()
        target = f"[{remote_host}]" if ":" in remote_host else remote_host
        argv = [*ssh_prefix, "-N", "-o", "ExitOnForwardFailure=yes",
                "-L", f"127.0.0.1:{self.local_port}:{target}:{remote_port}", "--", destination]
        folder.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(16)
        with open(folder / "forward.log", "ab") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                         start_new_session=True, env=child_env({TOKEN_VARIABLE: token}))
        self.record.write_text(json.dumps({"pid": self.proc.pid, "start_time": _start_time(self.proc.pid),
                                           "token": token, "local_port": self.local_port,
                                           "remote": f"{remote_host}:{remote_port}"}))
        self._wait_listening()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}"

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + FORWARD_WAIT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (self.folder / "forward.log").read_text(errors="replace").strip().splitlines()[-3:]
                self.record.unlink(missing_ok=True)
                raise ToolError(f"the ssh port forward to {self.remote_host}:{self.remote_port} on the GPU host "
                                f"exited ({self.proc.returncode}): {' '.join(tail) or 'no message'}; check that "
                                "the host allows TCP forwarding (sshd AllowTcpForwarding yes)")
            with socket.socket() as s:
                s.settimeout(0.5)
                if s.connect_ex(("127.0.0.1", self.local_port)) == 0:
                    return
            time.sleep(0.05)
        self.close()
        raise ToolError(f"the ssh port forward to {self.remote_host}:{self.remote_port} did not listen within "
                        f"{FORWARD_WAIT_S:g} s; check the connection to the GPU host and retry")

    def _end_stale(self) -> None:
        """End a forward this job's folder records from an earlier agent process, if it is still that one."""
        try:
            stale = json.loads(self.record.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return
        pid = stale.get("pid") if isinstance(stale, dict) else None
        if isinstance(pid, int) and stale.get("token") and is_process(pid, stale.get("start_time"), stale["token"]):
            _end_group(pid)
        self.record.unlink(missing_ok=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.poll() is None:
            _end_group(self.proc.pid, self.proc)
        self.record.unlink(missing_ok=True)
