"""What was submitted to Slurm for each key, kept beside the job folders: ``<jobs_root>/submissions.jsonl``.

A job folder (``jobs/<key>/``, with its ``slurm.json``) can be deleted while its Slurm job runs; this
file still names that job, so the key is not submitted a second time beside it. One line before
``sbatch`` (the keys and the job name), one after (the job id); appended, never rewritten.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from tools.base import ToolError
from tools.jobs.slurm.query import PENDING, RUNNING, SlurmJobInfo, checked_job_id, show_job, squeue_ids

FILE = "submissions.jsonl"


def record(root: Path, entry: dict) -> None:
    with open(root / FILE, "a") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _entries(root: Path) -> list[dict]:
    try:
        lines = (root / FILE).read_text().splitlines()
    except FileNotFoundError:
        return []
    entries = []
    for line in lines:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a crash
        if isinstance(entry, dict) and isinstance(entry.get("slurm_name"), str):
            entries.append(entry)
    return entries


def last_submission(root: Path, key: str) -> tuple[str, str | None, int | None] | None:
    """(job name, job id or None, array index or None) of the last submission of ``key``."""
    entries = _entries(root)
    for at in range(len(entries) - 1, -1, -1):
        keys = entries[at].get("keys")
        if isinstance(keys, list) and key in keys:
            name = entries[at]["slurm_name"]
            index = keys.index(key) if entries[at].get("as_array") else None
            job_id = next((e.get("job_id") for e in entries[at + 1:] if e["slurm_name"] == name and e.get("job_id")),
                          None)
            if job_id is not None and index is not None:
                job_id = f"{job_id}_{index}"
            return name, job_id, index
    return None


def still_active(root: Path, key: str, env: dict[str, str]) -> SlurmJobInfo | None:
    """The Slurm job last submitted for ``key`` while Slurm still has it pending or running, else None."""
    found = last_submission(root, key)
    if found is None:
        return None
    name, job_id, index = found
    ours = squeue_ids(name, env)  # a recorded id counts only while Slurm holds it under the name we gave it
    if job_id is None:  # a crash between sbatch and its answer
        job_id = next((i for i in ours if index is None or i.endswith(f"_{index}")), None)
    elif checked_job_id(job_id, str(root / FILE)) not in ours:
        return None
    info = show_job(job_id, env) if job_id else None
    return info if info is not None and info.state in PENDING | RUNNING else None


def refuse_if_still_active(root: Path, key: str, env: dict[str, str]) -> None:
    """A key with no ledger may still have a Slurm job: its folder was deleted while it ran."""
    info = still_active(root, key, env)
    if info is not None:
        where = f" on {info.node_list}" if info.node_list and info.node_list != "(null)" else ""
        raise ToolError(f"job {key!r} has no ledger ({root / key} is gone) but Slurm job {info.job_id}, submitted for "
                        f"it ({root / FILE}), is still {info.state}{where}; it is not submitted a second time beside "
                        f"it: wait for it to end, or cancel it with `scancel {info.job_id}`, then resume")
