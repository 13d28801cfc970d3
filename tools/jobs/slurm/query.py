"""Talking to Slurm's client commands: run them, and read job state from ``scontrol``/``squeue``.

``sacct`` is not used: many clusters (and ``AccountingStorageType=accounting_storage/none``)
have no accounting. ``scontrol show job`` knows a job until ``MinJobAge`` after it ended; after
that the ledger's exit.json is the only record, which is why the wrapper writes one.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from tools.base import ToolError

SLURM_COMMANDS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
_TIMEOUT_S = 60.0
PENDING = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SUSPENDED"}
RUNNING = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING"}


@dataclass(frozen=True)
class SlurmJobInfo:
    job_id: str
    state: str        # JobState, e.g. PENDING, RUNNING, COMPLETED, CANCELLED, NODE_FAIL
    reason: str       # why it is pending (Resources, Priority, ReqNodeNotAvail, ...) or None
    node_list: str
    batch_host: str = ""  # the node running the batch script (where a one-node job's server listens)


def run_slurm(argv: list[str], env: dict[str, str], *, check: bool = True) -> subprocess.CompletedProcess:
    """Run one Slurm client command; a controller that does not answer is a ToolError."""
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except FileNotFoundError as err:
        raise ToolError(f"the Slurm command {argv[0]!r} is not on PATH; load Slurm or pick another --executor") from err
    except subprocess.TimeoutExpired as err:
        raise ToolError(f"`{argv[0]}` did not answer within {_TIMEOUT_S:g} s; is slurmctld up? (`scontrol ping`)") from err
    if "unable to contact slurm controller" in done.stderr.lower():
        raise ToolError(f"`{argv[0]}` cannot reach slurmctld ({done.stderr.strip()[-200:]}); submitted jobs keep "
                        "their state: check `scontrol ping` and poll again")
    if check and done.returncode != 0:
        raise ToolError(f"`{' '.join(argv[:3])}` failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    return done


def _field(record: str, name: str) -> str:
    found = re.search(rf"(?:^|\s){name}=(\S+)", record)
    return found.group(1) if found else ""


def show_job(job_id: str, env: dict[str, str]) -> SlurmJobInfo | None:
    """The controller's view of one job (``123`` or array task ``123_4``); None once it forgot it."""
    done = run_slurm(["scontrol", "show", "job", "-o", job_id], env, check=False)
    if done.returncode != 0:
        if "invalid job id" in done.stderr.lower():
            return None
        raise ToolError(f"`scontrol show job {job_id}` failed: {done.stderr.strip()[-300:]}")
    records = [line for line in done.stdout.splitlines() if line.strip()]
    if not records:
        return None
    record = records[0]
    return SlurmJobInfo(job_id=job_id, state=_field(record, "JobState"), reason=_field(record, "Reason"),
                        node_list=_field(record, "NodeList"), batch_host=_field(record, "BatchHost"))


def node_address(node: str, env: dict[str, str]) -> str:
    """The address Slurm itself uses to reach ``node`` (its NodeAddr; the name when none is set)."""
    done = run_slurm(["scontrol", "show", "node", "-o", node], env, check=False)
    address = _field(done.stdout, "NodeAddr") if done.returncode == 0 else ""
    return address if address and address != "(null)" else node


def squeue_ids(job_name: str, env: dict[str, str]) -> list[str]:
    """Ids of every job (one line per array task) the controller still knows under ``job_name``."""
    done = run_slurm(["squeue", "-h", "-r", "-t", "all", "-n", job_name, "-o", "%i"], env)
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]
