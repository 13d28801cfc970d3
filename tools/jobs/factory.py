"""Build the executor named by ``--executor``: ``local``, ``ssh://user@host[:port]``, ``slurm[:partition]``."""
from __future__ import annotations

from pathlib import Path

from tools.base import ToolError
from tools.jobs.executor import Executor
from tools.jobs.local import LocalExecutor

ACCEPTED = "'local', 'ssh://user@host[:port]' (or ssh://alias from ~/.ssh/config), 'slurm' or 'slurm:PARTITION'"


def make_executor(spec: str, jobs_root: Path, *, ssh_options: list[str] | None = None) -> Executor:
    """The executor for ``spec``; remote ones re-attach to the ledger of ``jobs_root``'s run.

    ``ssh_options`` are extra ``ssh`` arguments (e.g. ``["-F", "ssh_config"]``); users normally
    need none because ssh reads their agent and ~/.ssh/config.
    """
    spec = spec.strip()
    if spec == "local":
        return LocalExecutor(jobs_root)
    if spec.startswith("ssh://"):
        from tools.jobs.ssh import SshExecutor

        return SshExecutor(spec, jobs_root, ssh_options=ssh_options)
    if spec == "slurm" or spec.startswith("slurm:"):
        from tools.jobs.slurm import SlurmExecutor

        partition = spec.partition(":")[2] or None
        if spec.endswith(":"):
            raise ToolError(f"executor {spec!r} names an empty partition; use 'slurm' or 'slurm:PARTITION'")
        return SlurmExecutor(jobs_root, partition=partition)
    raise ToolError(f"unknown executor {spec!r}; use one of {ACCEPTED}")
