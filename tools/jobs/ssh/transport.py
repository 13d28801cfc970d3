"""The SSH executor's transport: one ``ssh HOST python3 -I -S -c PROGRAM OP`` call per ledger
operation, a JSON request on stdin and a JSON answer on stdout, with ssh's own failures named. The
calls share one connection to the host (multiplex.py).

PROGRAM is ``remote_ledger.py`` preceded by the standalone modules it imports (``processes.py``,
``job_folder.py``), so the host needs nothing but ``python3``; ``-I`` keeps the remote working
folder (``$HOME``) and ``PYTHON*`` variables from shadowing what the program imports; ``-S`` skips
``site`` (the host's installed packages and their ``.pth`` hooks), which that standard-library
program does not need. A ``python3`` found by name is called by the path it answers with from then on.

A host that answered once and then stops answering (sshd restarting, the network away) is waited
out by ``OutageWait`` for the calls that only read or end what is ours; ``launch`` only while the
host refuses the connection (a call that went out and lost its answer could start the job twice),
and a host the run never reached fails at once.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from tools.base import ToolError
from tools.jobs.executor_spec import ExecutorSpec, ExecutorSpecError
from tools.jobs.outages import OutageWait, Unreachable
from tools.jobs.ssh.multiplex import NOT_SHARED
from tools.child_env import child_env

HERE = Path(__file__).parent
WRAPPER_SOURCE = (HERE.parent / "wrapper.py").read_text()
PROCESSES_SOURCE = (HERE.parent / "processes.py").read_text()


def _ledger_program() -> str:
    """remote_ledger.py preceded by the standalone modules it imports, as one ``python3 -c`` program."""
    modules = [(name, (HERE.parent / f"{name}.py").read_text()) for name in ("processes", "job_folder")]
    return ("import sys, types\n"
            f"for _name, _source in {modules!r}:\n"
            "    _module = types.ModuleType(_name)\n"
            "    exec(compile(_source, _name + '.py', 'exec'), _module.__dict__)\n"
            "    sys.modules[_name] = _module\n"
            + (HERE / "remote_ledger.py").read_text())


LEDGER_SOURCE = _ledger_program()
OP_TIMEOUT_S = 60.0  # a ledger operation is quick; stop adds the job's grace on top


def parse_ssh_target(url: str) -> tuple[str, int | None]:
    """``ssh://user@host[:port]`` → (``user@host`` or ``host``, port or None)."""
    try:
        spec = ExecutorSpec.parse(url)
    except ExecutorSpecError as err:
        raise ToolError(str(err)) from None
    if spec.kind != "ssh":
        raise ToolError(f"bad SSH executor {url!r}; write it as ssh://user@host[:port] (or ssh://alias from ~/.ssh/config)")
    return spec.destination, spec.port


RETRIED_OPS = frozenset({"poll", "list", "listens", "get", "pack", "pack_dir", "gpus", "port", "put", "stop"})
# ssh's words for a host or network that does not answer (exit 255), as opposed to one that refuses us
_NO_ANSWER = ("connection refused", "no route to host", "timed out", "network is unreachable", "connection closed",
              "connection reset", "broken pipe", "kex_exchange_identification")


def classify_ssh_failure(where: str, stderr: str, shared: bool) -> ToolError:
    """Name the problem and the fix for ssh's own failures (exit status 255); ``Unreachable`` when
    the host did not answer. On a shared connection (multiplex.py) a call in flight when the
    master's connection drops (sshd restarting, the network away) ends 255 without a word: the
    master, not this ssh, saw the connection go; that is no answer too."""
    check = f"check the connection with `ssh {where.removeprefix('ssh://')} true`"
    if shared and not stderr.strip():
        return Unreachable(f"ssh to {where} failed: the shared connection to the host closed during the call",
                           where, check)
    text = stderr.strip().splitlines()
    last = text[-1] if text else "ssh failed without a message"
    low = stderr.lower()
    if "permission denied" in low:
        fix = ("the host refused our keys: load the right key into ssh-agent, or set IdentityFile for "
               "this host in ~/.ssh/config")
    elif "connection refused" in low or "no route to host" in low or "timed out" in low:
        fix = "the host is unreachable: check the host name and port, and that sshd runs there"
    elif "could not resolve hostname" in low:
        fix = "the host name does not resolve: check the spelling or add a Host entry to ~/.ssh/config"
    elif "host key verification failed" in low:
        fix = "the host key is unknown or changed: connect once with `ssh` to check and accept it"
    else:
        fix = "run the same `ssh` by hand to see what it needs"
    message = f"ssh to {where} failed: {last} — {fix}"
    if any(words in low for words in _NO_ANSWER):
        # "connect to host ...: Connection refused", or closed during the key exchange: no command went out
        unsent = "connect to host" in low or "kex_exchange_identification" in low
        return Unreachable(message, where, check, unsent=unsent)
    return ToolError(message)


class SshTransport:
    """What ``SshExecutor`` needs to talk to its host (url, destination, port, ssh_options,
    connect_timeout_s, remote_python, remote_root, shared_connection are set by it)."""

    url: str
    destination: str
    port: int | None
    ssh_options: list[str]
    connect_timeout_s: int
    remote_python: str
    remote_root: str
    shared_connection: list[str]  # multiplex.shared_options for this host and these options, found once
    outage: OutageWait | None  # how long a host that answered before is waited for
    answered: bool = False  # the host has answered this run (a call of this process, or its ledger)

    # -- transport -------------------------------------------------------------------------
    def _ssh_prefix(self, shared: bool = True) -> list[str]:
        """ssh and its options; ``shared``: on the host's shared connection (multiplex.py), else on a
        connection of its own (ssh keeps the first value it reads, so NOT_SHARED goes first)."""
        if shared:
            argv = ["ssh", *self.ssh_options, *self.shared_connection]
        else:
            argv = ["ssh", *NOT_SHARED, *self.ssh_options]
        argv += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.connect_timeout_s}"]
        return argv + (["-p", str(self.port)] if self.port is not None else [])

    def _ssh_argv(self, remote_command: str) -> list[str]:
        return [*self._ssh_prefix(), "--", self.destination, remote_command]

    def _call(self, op: str, request: dict, timeout_s: float = OP_TIMEOUT_S, raw: bool = False):
        if not self.answered or self.outage is None:
            return self._call_once(op, request, timeout_s, raw)
        if op in RETRIED_OPS:
            return self.outage.call(f"`{op}`", lambda: self._call_once(op, request, timeout_s, raw))
        return self.outage.call(f"`{op}`", lambda: self._call_unsent_only(op, request, timeout_s, raw))

    def _call_unsent_only(self, op: str, request: dict, timeout_s: float, raw: bool):
        """``launch`` is waited for only while the host refuses the connection: a call cut off after it
        went out may have started the job, and its lost answer is not taken for none."""
        try:
            return self._call_once(op, request, timeout_s, raw)
        except Unreachable as err:
            if err.unsent:
                raise
            raise ToolError(str(err)) from None

    def _call_once(self, op: str, request: dict, timeout_s: float, raw: bool):
        request = {"root": self.remote_root, **request}
        remote_command = " ".join(shlex.quote(w) for w in (self.remote_python, "-I", "-S", "-c", LEDGER_SOURCE, op))
        try:
            done = subprocess.run(self._ssh_argv(remote_command), input=json.dumps(request).encode(),
                                  capture_output=True, timeout=timeout_s + self.connect_timeout_s, env=child_env())
        except FileNotFoundError as err:
            raise ToolError("the `ssh` program is not installed here; install OpenSSH's client "
                            "(Debian: openssh-client)") from err
        except subprocess.TimeoutExpired as err:
            raise Unreachable(f"ssh to {self.url} did not answer {op!r} within {timeout_s:g} s; check the connection "
                              "and retry (jobs keep running remotely)", self.url,
                              f"check the connection with `ssh {self.destination} true`") from err
        stderr = done.stderr.decode("utf-8", errors="replace")
        if done.returncode == 255:
            raise classify_ssh_failure(self.url, stderr, shared=bool(self.shared_connection))
        self.answered = True
        if done.returncode == 127:
            raise ToolError(f"{self.remote_python!r} was not found on {self.url}; install python3 there "
                            "or give the remote python's path")
        if done.returncode != 0:
            tail = "\n".join(stderr.strip().splitlines()[-5:])
            raise ToolError(f"remote ledger operation {op!r} on {self.url} failed (exit {done.returncode}): {tail}")
        if raw:
            return done.stdout
        answer = json.loads(done.stdout)
        self._remember_interpreter(answer.get("python"))
        if "error" in answer:
            raise ToolError(answer["error"])
        return answer

    def _remember_interpreter(self, path: object) -> None:
        """Later calls run the interpreter the first one found by name, by its path: a name the host's
        PATH resolves through a version manager's shim (pyenv: a chain of shell scripts) is paid again
        on every call otherwise."""
        if (os.sep not in self.remote_python and isinstance(path, str) and path.startswith("/")
                and path.isprintable() and path.strip() == path):
            self.remote_python = path
