"""Build the executor an ``ExecutorSpec`` names (``--executor``: local, ssh://..., slurm[:partition]).

Switching executors within a run (``dsv4-agent resume RUN --executor ...``): a run whose jobs were
never launched (e.g. planned on a laptop without GPUs) takes the new executor; a run with jobs in
its ledger keeps the executor that launched them, because only that one can re-attach to them.
"""
from __future__ import annotations

import json
from pathlib import Path

from tools.base import ToolError
from tools.jobs.executor import Executor
from tools.jobs.executor_spec import ExecutorSpec, ExecutorSpecError
from tools.jobs.local import LocalExecutor
from tools.jobs.outages import OutageWait


def _recorded_executor(jobs_root: Path) -> tuple[ExecutorSpec | None, list[str]]:
    """(the executor that owns this ledger or None, keys of jobs launched so far)."""
    launched = sorted(d.name for d in jobs_root.iterdir() if (d / "job.json").exists()) if jobs_root.is_dir() else []
    try:
        record = json.loads((jobs_root / "executor.json").read_text())
    except FileNotFoundError:
        return (ExecutorSpec(kind="local") if launched else None), launched  # LocalExecutor keeps no record
    except json.JSONDecodeError as err:
        raise ToolError(f"{jobs_root / 'executor.json'} is not valid JSON ({err}); restore it or start a new run") from err
    try:
        return ExecutorSpec.parse(record.get("url") or record.get("kind") or ""), launched
    except ExecutorSpecError as err:
        raise ToolError(f"{jobs_root / 'executor.json'} names no executor we know ({err}); restore it or start a "
                        "new run") from None


def claim_ledger(spec: ExecutorSpec, jobs_root: Path) -> None:
    """Refuse ``spec`` for a ledger with jobs of another executor; forget the old executor otherwise."""
    recorded, launched = _recorded_executor(jobs_root)
    if recorded is None or recorded.reaches_same_ledger(spec):
        return
    if launched:
        shown = ", ".join(launched[:3]) + (f" and {len(launched) - 3} more" if len(launched) > 3 else "")
        raise ToolError(f"this run's jobs ({shown}) were launched with executor {str(recorded)!r}, which alone can "
                        f"re-attach to them; resume with --executor {recorded} or start a new run for {str(spec)!r}")
    for name in ("executor.json", "shared_probe.json"):  # no job ever ran: the new executor takes over
        (jobs_root / name).unlink(missing_ok=True)


def make_executor(spec: ExecutorSpec | str, jobs_root: Path, *, ssh_options: list[str] | None = None,
                  nvidia_smi: str = "nvidia-smi", outage: OutageWait | None = None) -> Executor:
    """The executor for ``spec``; remote ones re-attach to the ledger of ``jobs_root``'s run.

    ``ssh_options`` are extra ``ssh`` arguments (e.g. ``["-F", "ssh_config"]``); users normally
    need none because ssh reads their agent and ~/.ssh/config. They must come from the user (the
    command line or their settings), never from a run folder. ``nvidia_smi`` is the binary that
    lists the GPUs where the jobs run. ``outage``: how long calls to a controller or host that stopped
    answering are retried, and where their retry lines go.
    """
    if not isinstance(spec, ExecutorSpec):  # a str; or whatever a run folder's config.json holds
        try:
            spec = ExecutorSpec.parse(spec)
        except ExecutorSpecError as err:
            raise ToolError(str(err)) from None
    jobs_root = Path(jobs_root)
    claim_ledger(spec, jobs_root)
    if spec.kind == "ssh":
        from tools.jobs.ssh.executor import SshExecutor

        return SshExecutor(spec, jobs_root, ssh_options=ssh_options, nvidia_smi=nvidia_smi, outage=outage)
    if spec.kind == "slurm":
        from tools.jobs.slurm.executor import SlurmExecutor

        return SlurmExecutor(jobs_root, partition=spec.partition, outage=outage)
    return LocalExecutor(jobs_root, nvidia_smi=nvidia_smi)
