"""Build the executor named by ``--executor`` (``local``; remote kinds are added beside it)."""
from __future__ import annotations

from pathlib import Path

from tools.base import ToolError
from tools.jobs.executor import Executor
from tools.jobs.local import LocalExecutor


def make_executor(spec: str, jobs_root: Path) -> Executor:
    if spec == "local":
        return LocalExecutor(jobs_root)
    raise ToolError(f"unknown executor {spec!r}; use 'local'")
