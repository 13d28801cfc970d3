"""Job manager: detached jobs with an on-disk ledger, behind an ``Executor`` interface.

The names below are imported on first use, so that a reader of the ledger alone (the job listing
of ``dsv4-agent jobs``, tools/jobs/ledger/listing.py) loads none of the pydantic models.
"""
from importlib import import_module

_HOMES = {"JobSpec": "tools.jobs.spec", "JobState": "tools.jobs.spec", "JobStatus": "tools.jobs.spec",
          "TERMINAL": "tools.jobs.spec", "Executor": "tools.jobs.executor", "LocalExecutor": "tools.jobs.local"}

__all__ = list(_HOMES)


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
