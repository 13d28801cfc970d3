"""Job manager: detached jobs with an on-disk ledger, behind an ``Executor`` interface."""
from tools.jobs.spec import JobSpec, JobState, JobStatus, TERMINAL
from tools.jobs.executor import Executor
from tools.jobs.local import LocalExecutor

__all__ = ["JobSpec", "JobState", "JobStatus", "TERMINAL", "Executor", "LocalExecutor"]
