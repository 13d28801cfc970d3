"""The interface every executor (local, SSH, Slurm) implements, with its declared capabilities.

Callers branch on ``executor.capabilities``, never on an executor's name or on which methods it
happens to have: what differs between executors is said once, here, by each executor.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from tools.gpus import DetectGpusResult
from tools.jobs import processes
from tools.jobs.spec import JobSpec, JobState


@dataclass(frozen=True)
class Capabilities:
    """What is true of the place an executor runs jobs."""

    remote_host: bool = False
    """Jobs run on another host (SSH): settings paths are that host's, the run-folder files a job
    needs are copied there and its results fetched back (``fetch_run_file``), and its ports are
    reached through ``reach`` (a port forward)."""
    servers_on_nodes: bool = False
    """A server is a batch job on a node picked when it starts (Slurm): launch it through
    ``NodeServing.serve_argv`` and learn where it listens from ``NodeServing.server_endpoint``."""
    job_arrays: bool = False
    """``launch_array`` submits many units as one job (Slurm job arrays)."""
    gpus_from_elsewhere: bool = False
    """``detect_gpus`` lists GPUs of another host or partition, not this machine's ``nvidia-smi``."""
    jobs_on_other_nodes: bool = False
    """Jobs run on cluster nodes that share the run folder with this machine (Slurm): a file installed
    from here reaches them only if it, too, is on a filesystem they share."""


@runtime_checkable
class Executor(Protocol):
    """Runs jobs detached from the agent and remembers them in a ledger on disk.

    Contract, relied on by every graph node that launches or polls a job:
    - ``launch`` is idempotent per ``spec.key``: a key already in the ledger is re-attached,
      never started twice (after a crash the same node runs again).
    - ``stop`` only ever signals processes this executor started, identified by the start times
      its ledger recorded; it raises ToolError (saying how to stop it by hand) rather than guess.
    - ``job_dir(key)`` is a local folder holding ``log.txt`` and whatever results the job wrote
      (remote executors copy them back in ``poll``).
    """

    name: str
    label: str  # the --executor value that reaches this executor's jobs again ("local", "ssh://host", "slurm")
    capabilities: Capabilities
    host_python: str  # a python3 where the jobs run, for the stdlib-only helpers we run there

    def launch(self, spec: JobSpec) -> JobState: ...

    def launch_array(self, specs: list[JobSpec]) -> list[JobState]: ...

    def poll(self, key: str) -> JobState: ...

    def stop(self, key: str, grace_s: float | None = None) -> JobState: ...

    def read_log(self, key: str, max_chars: int = 4000) -> str: ...

    def job_dir(self, key: str) -> Path: ...

    def jobs(self) -> list[JobState]: ...

    def detect_gpus(self) -> DetectGpusResult: ...

    def free_port(self, host: str = "127.0.0.1") -> int: ...

    def reach(self, key: str, host: str, port: int) -> str: ...

    def release(self, key: str) -> None: ...

    def job_listens(self, key: str, port: int) -> bool: ...

    def fetch_run_file(self, local_path: Path) -> bool: ...


@runtime_checkable
class NodeServing(Protocol):
    """The extra interface of executors with ``capabilities.servers_on_nodes``."""

    def serve_argv(self, key: str, argv: list[str]) -> list[str]: ...

    def server_endpoint(self, key: str) -> tuple[str, int] | None: ...


def base_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def free_local_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now on this machine, out of the way of clients' own ports."""
    return processes.free_port(host)


class SameHostDefaults:
    """Defaults for executors whose jobs run where the run folder is (local; Slurm's shared folder)."""

    capabilities = Capabilities()
    host_python = sys.executable

    def launch_array(self, specs: list[JobSpec]) -> list[JobState]:
        return [self.launch(spec) for spec in specs]  # type: ignore[attr-defined]

    def free_port(self, host: str = "127.0.0.1") -> int:
        return free_local_port(host)

    def reach(self, key: str, host: str, port: int) -> str:
        return base_url(host, port)

    def release(self, key: str) -> None:
        return None

    def fetch_run_file(self, local_path: Path) -> bool:
        return Path(local_path).exists()  # the job wrote it in place
