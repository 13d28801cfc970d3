"""The jobs of a local ledger (LocalExecutor's) as plain data, read without the pydantic models.

``ledger_state`` is what ``LocalExecutor.poll`` turns into a ``JobState``, so the executor and the
listing of ``dsv4-agent jobs RUN`` read a ledger folder the same way; the listing, which only
reads, skips building the models (their import costs more than reading the ledger).
tests/test_jobs_listing.py holds the two equal on ledgers written by real jobs.
"""
from __future__ import annotations

from pathlib import Path

from tools.base import ToolError
from tools.jobs import job_folder
from tools.jobs.ledger.files import last_error_line, ledger_keys, read_json, tail_log
from tools.jobs.ledger.state import state_fields

LOG_TAIL_BYTES = 8192  # enough for a traceback's last lines, little to read per listed job


def ledger_state(root: Path, key: str) -> dict:
    """``JobState``'s fields for job ``key`` of the ledger under ``root`` (ToolError: no such job)."""
    folder = Path(root) / key
    if read_json(folder / "job.json") is None:
        raise ToolError(f"no job {key!r} in {root}; `dsv4-agent jobs RUN` lists the run's jobs")
    fields = state_fields(key, job_folder.snapshot(str(folder)), str(folder / "log.txt"))
    # "exit code 1" alone says nothing of why
    if fields["status"] == "failed" and fields["exit_code"] and (why := last_error_line(tail_log(folder, LOG_TAIL_BYTES))):
        fields["reason"] = f"{fields['reason']}: {why}"
    return fields


def local_jobs(root: Path) -> list[dict]:
    """What ``LocalExecutor(root).jobs()`` answers, as each ``JobState``'s fields."""
    return [ledger_state(root, key) for key in ledger_keys(Path(root))]
