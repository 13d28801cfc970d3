"""Build the executor named by ``--executor``: ``local``, ``ssh://user@host[:port]``, ``slurm[:partition]``.

Switching executors within a run (``dsv4-agent resume RUN --executor ...``): a run whose jobs were
never launched (e.g. planned on a laptop without GPUs) takes the new executor; a run with jobs in
its ledger keeps the executor that launched them, because only that one can re-attach to them.
"""
from __future__ import annotations

import json
from pathlib import Path

from tools.base import ToolError
from tools.jobs.executor import Executor
from tools.jobs.local import LocalExecutor

ACCEPTED = "'local', 'ssh://user@host[:port]' (or ssh://alias from ~/.ssh/config), 'slurm' or 'slurm:PARTITION'"


def _recorded_executor(jobs_root: Path) -> tuple[str | None, list[str]]:
    """(the executor that owns this ledger or None, keys of jobs launched so far)."""
    launched = sorted(d.name for d in jobs_root.iterdir() if (d / "job.json").exists()) if jobs_root.is_dir() else []
    try:
        record = json.loads((jobs_root / "executor.json").read_text())
    except FileNotFoundError:
        return ("local" if launched else None), launched  # LocalExecutor keeps no record
    except json.JSONDecodeError as err:
        raise ToolError(f"{jobs_root / 'executor.json'} is not valid JSON ({err}); restore it or start a new run") from err
    return (record.get("url") or record.get("kind")), launched


def _same(recorded: str, spec: str) -> bool:
    if recorded == "slurm":
        return spec == "slurm" or spec.startswith("slurm:")  # the partition may change between attempts
    return recorded == spec


def claim_ledger(spec: str, jobs_root: Path) -> None:
    """Refuse ``spec`` for a ledger with jobs of another executor; forget the old executor otherwise."""
    recorded, launched = _recorded_executor(jobs_root)
    if recorded is None or _same(recorded, spec):
        return
    if launched:
        shown = ", ".join(launched[:3]) + (f" and {len(launched) - 3} more" if len(launched) > 3 else "")
        raise ToolError(f"this run's jobs ({shown}) were launched with executor {recorded!r}, which alone can "
                        f"re-attach to them; resume with --executor {recorded} or start a new run for {spec!r}")
    for name in ("executor.json", "shared_probe.json"):  # no job ever ran: the new executor takes over
        (jobs_root / name).unlink(missing_ok=True)


def make_executor(spec: str, jobs_root: Path, *, ssh_options: list[str] | None = None,
                  nvidia_smi: str = "nvidia-smi") -> Executor:
    """The executor for ``spec``; remote ones re-attach to the ledger of ``jobs_root``'s run.

    ``ssh_options`` are extra ``ssh`` arguments (e.g. ``["-F", "ssh_config"]``); users normally
    need none because ssh reads their agent and ~/.ssh/config. ``nvidia_smi`` is the binary the
    SSH executor runs on the host to list its GPUs.
    """
    spec = spec.strip()
    jobs_root = Path(jobs_root)
    if spec == "local":
        claim_ledger(spec, jobs_root)
        return LocalExecutor(jobs_root)
    if spec.startswith("ssh://"):
        from tools.jobs.ssh.executor import SshExecutor, parse_ssh_target

        parse_ssh_target(spec)  # a malformed URL is named before anything on disk changes
        claim_ledger(spec, jobs_root)
        return SshExecutor(spec, jobs_root, ssh_options=ssh_options, nvidia_smi=nvidia_smi)
    if spec == "slurm" or spec.startswith("slurm:"):
        from tools.jobs.slurm.executor import SlurmExecutor

        partition = spec.partition(":")[2] or None
        if spec.endswith(":"):
            raise ToolError(f"executor {spec!r} names an empty partition; use 'slurm' or 'slurm:PARTITION'")
        claim_ledger(spec, jobs_root)
        return SlurmExecutor(jobs_root, partition=partition)
    raise ToolError(f"unknown executor {spec!r}; use one of {ACCEPTED}")
