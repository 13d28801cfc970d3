"""The interface every executor (local, SSH, Slurm) implements."""
from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from tools.jobs.spec import JobSpec, JobState


@runtime_checkable
class Executor(Protocol):
    """Runs jobs detached from the agent and remembers them in a ledger on disk.

    Contract, relied on by every graph node that launches or polls a job:
    - ``launch`` is idempotent per ``spec.key``: a key already in the ledger is re-attached,
      never started twice (after a crash the same node runs again).
    - ``stop`` only ever signals process groups this executor started (checked against the ledger).
    - ``job_dir(key)`` is a local folder holding ``log.txt`` and whatever results the job wrote
      (remote executors copy them back in ``poll``).
    """

    name: str

    def launch(self, spec: JobSpec) -> JobState: ...

    def poll(self, key: str) -> JobState: ...

    def stop(self, key: str, grace_s: float | None = None) -> JobState: ...

    def read_log(self, key: str, max_chars: int = 4000) -> str: ...

    def job_dir(self, key: str) -> Path: ...

    def jobs(self) -> list[JobState]: ...
