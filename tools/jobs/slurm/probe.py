"""Preflight for the Slurm executor: do compute nodes see the run folder, and what GPUs do they have.

The Slurm executor reads and writes its ledger, scripts and outputs in place, so the run folder
must be on a filesystem the compute nodes share. ``probe_shared_folder`` submits a tiny job that
copies a token inside the run folder: copied -> fine (remembered in ``shared_probe.json``); the job
ended without copying -> ToolError naming the fix; still queued after the wait -> cancelled, and
a note says the check could not be made.
"""
from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import time

from tools.base import ToolError
from tools.gpus import DetectGpusResult, GpuInfo
from tools.jobs.remote_gpus import parse_slurm_gres
from tools.jobs.slurm.query import PENDING, RUNNING, cancel, run_slurm, show_job, submitted_id

PROBE_WAIT_S = 120.0  # a probe still queued after this is cancelled: the check is then only a note


def detect_partition_gpus(ex) -> DetectGpusResult:
    note = ex.probe_shared_folder()
    argv = ["sinfo", "-h", "-o", "%G"] + ([f"--partition={ex.partition}"] if ex.partition else [])
    count, kind = parse_slurm_gres(run_slurm(argv, ex.env).stdout)
    where = f"partition {ex.partition}" if ex.partition else "the default partition"
    if not count:
        return DetectGpusResult(gpus=[], note=f"Slurm {where} offers no gres gpu (sinfo -o %G)" + note)
    name = f"Slurm gres gpu:{kind}" if kind else "Slurm gres gpu"  # the real model shows on the node only
    return DetectGpusResult(gpus=[GpuInfo(index=i, name=name, memory_mib=0) for i in range(count)],
                            note=note.lstrip("; "))


def probe_shared_folder(ex, wait_s: float = PROBE_WAIT_S) -> str:
    """'' when a compute node copied the token; a note when the probe never ran in time."""
    record_path = ex.root / "shared_probe.json"
    if record_path.exists() and json.loads(record_path.read_text()).get("ok"):
        return ""
    folder = ex.root / f"probe-{secrets.token_hex(3)}"
    folder.mkdir(parents=True)
    token = secrets.token_hex(8)
    (folder / "token").write_text(token)
    argv = ["sbatch", "--parsable", f"--job-name=dsv4-{ex.namespace}-probe", "--time=2",
            f"--export={','.join(sorted(ex.env))}",
            f"--output={folder / 'slurm.out'}", f"--chdir={folder}",
            "--wrap", f"cat {shlex.quote(str(folder / 'token'))} > {shlex.quote(str(folder / 'seen'))}"]
    if ex.partition:
        argv.append(f"--partition={ex.partition}")
    done = run_slurm(argv, ex.env, check=False)
    if done.returncode != 0:
        raise ToolError(f"sbatch refused the run-folder probe job: {done.stderr.strip()[-300:]}")
    job_id = submitted_id(done.stdout)
    deadline = time.monotonic() + wait_s
    info = show_job(job_id, ex.env)
    while info is not None and (info.state in PENDING or info.state in RUNNING) and time.monotonic() < deadline:
        time.sleep(0.5)
        info = show_job(job_id, ex.env)
    seen = (folder / "seen").read_text() if (folder / "seen").exists() else None
    if seen == token:
        tmp = record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"ok": True, "job_id": job_id, "node": info.node_list if info else ""}))
        os.replace(tmp, record_path)
        shutil.rmtree(folder, ignore_errors=True)
        return ""
    if info is not None and (info.state in PENDING or info.state in RUNNING):
        cancel(job_id, ex.env)
        return (f"; the run-folder probe (Slurm job {job_id}) did not run within {wait_s:g} s, so it is unchecked "
                f"that compute nodes see {ex.root}")
    node = info.node_list if info else "the compute node"
    raise ToolError(f"Slurm job {job_id} on {node} could not read or write the run folder {ex.root} "
                    f"(it ended {info.state if info else 'and was forgotten'} without copying the probe token): "
                    "the run folder must be on a filesystem shared with the compute nodes; pass --runs-dir "
                    "on such a filesystem (e.g. your cluster home or project space)")
