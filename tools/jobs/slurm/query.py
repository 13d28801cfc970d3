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
from tools.jobs.outages import OutageWait, Unreachable

SLURM_COMMANDS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
_TIMEOUT_S = 60.0
PENDING = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SUSPENDED"}
RUNNING = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING"}
# Slurm's words for a controller that does not answer: down or restarting ("Unable to contact"), or one
# that took the connection and dropped it ("Unexpected missing socket error") or went quiet mid-request
_NO_ANSWER = ("unable to contact slurm controller", "zero bytes were transmitted or received",
              "socket timed out on send/recv", "connection reset by peer", "connection refused",
              "communication connection failure", "backup controller in standby mode",
              "unexpected missing socket error")
_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")  # a job, or one task of a job array


def checked_job_id(value: object, where: str) -> str:
    """``value`` as a Slurm job id (``123`` or array task ``123_4``); anything else is refused
    before it reaches a Slurm command, where it would be read as an option (``--user=root``)."""
    text = str(value).strip()
    if not _JOB_ID.match(text):
        raise ToolError(f"{where} names Slurm job {text[:80]!r}, which is not a job id (digits, or digits_digits "
                        "for an array task); nothing was sent to Slurm. The ledger was edited or damaged: "
                        "check it, or cancel the job by hand with `scancel ID`")
    return text


@dataclass(frozen=True)
class SlurmJobInfo:
    job_id: str
    state: str        # JobState, e.g. PENDING, RUNNING, COMPLETED, CANCELLED, NODE_FAIL
    reason: str       # why it is pending (Resources, Priority, ReqNodeNotAvail, ...) or None
    node_list: str
    batch_host: str = ""  # the node running the batch script (where a one-node job's server listens)
    restarts: int = 0     # times Slurm requeued it (``scontrol requeue``, preemption, node failure)


def run_slurm(argv: list[str], env: dict[str, str], *, check: bool = True,
              outage: OutageWait | None = None) -> subprocess.CompletedProcess:
    """Run one Slurm client command; a controller that does not answer is ``Unreachable`` (a
    ToolError), tried again through ``outage`` when one is given (status calls only: never sbatch)."""
    if outage is not None:
        return outage.call(f"`{' '.join(argv[:3])}`", lambda: run_slurm(argv, env, check=check))
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except FileNotFoundError as err:
        raise ToolError(f"the Slurm command {argv[0]!r} is not on PATH; load Slurm or pick another --executor") from err
    except subprocess.TimeoutExpired:
        raise Unreachable(f"`{argv[0]}` did not answer within {_TIMEOUT_S:g} s", controller(env),
                          "check `scontrol ping`") from None
    if any(words in done.stderr.lower() for words in _NO_ANSWER):
        raise Unreachable(f"`{argv[0]}`: {done.stderr.strip()[-200:]}", controller(env), "check `scontrol ping`")
    if check and done.returncode != 0:
        raise ToolError(f"`{' '.join(argv[:3])}` failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    return done


def controller(env: dict[str, str]) -> str:
    """slurmctld and its host, as the Slurm configuration names it (for messages)."""
    conf = env.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
    try:
        with open(conf) as f:
            for line in f:
                key, _, value = line.strip().partition("=")
                if key.lower() in ("slurmctldhost", "controlmachine") and value:
                    return f"slurmctld on {value.split()[0]}"
    except OSError:
        pass
    return "slurmctld"


def _field(record: str, name: str) -> str:
    found = re.search(rf"(?:^|\s){name}=(\S+)", record)
    return found.group(1) if found else ""


def show_job(job_id: str, env: dict[str, str], outage: OutageWait | None = None) -> SlurmJobInfo | None:
    """The controller's view of one job (``123`` or array task ``123_4``); None once it forgot it."""
    job_id = checked_job_id(job_id, "the ledger")
    done = run_slurm(["scontrol", "show", "job", "-o", job_id], env, check=False, outage=outage)
    if done.returncode != 0:
        if "invalid job id" in done.stderr.lower():
            return None
        raise ToolError(f"`scontrol show job {job_id}` failed: {done.stderr.strip()[-300:]}")
    records = [line for line in done.stdout.splitlines() if line.strip()]
    if not records:
        return None
    record = records[0]
    return SlurmJobInfo(job_id=job_id, state=_field(record, "JobState"), reason=_field(record, "Reason"),
                        node_list=_field(record, "NodeList"), batch_host=_field(record, "BatchHost"),
                        restarts=int(restarts) if (restarts := _field(record, "Restarts")).isdigit() else 0)


def node_address(node: str, env: dict[str, str]) -> str:
    """The address Slurm itself uses to reach ``node`` (its NodeAddr; the name when none is set)."""
    done = run_slurm(["scontrol", "show", "node", "-o", node], env, check=False)
    address = _field(done.stdout, "NodeAddr") if done.returncode == 0 else ""
    return address if address and address != "(null)" else node


def squeue_ids(job_name: str, env: dict[str, str]) -> list[str]:
    """Ids of every job (one line per array task) the controller still knows under ``job_name``."""
    done = run_slurm(["squeue", "-h", "-r", "-t", "all", f"--name={job_name}", "-o", "%i"], env)
    return [checked_job_id(line, "squeue") for line in done.stdout.splitlines() if line.strip()]


def cancel(job_id: str, env: dict[str, str], *extra: str) -> None:
    """``scancel [EXTRA...] JOB_ID`` for a job id that is one (see ``checked_job_id``)."""
    run_slurm(["scancel", *extra, "--", checked_job_id(job_id, "the ledger")], env, check=False)


def submitted_id(stdout: str) -> str:
    """The job id ``sbatch --parsable`` printed (``ID`` or ``ID;CLUSTER``)."""
    return checked_job_id(stdout.strip().split(";")[0], "sbatch's answer")
