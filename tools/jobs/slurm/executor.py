"""SlurmExecutor: jobs as Slurm batch jobs, ledger in ``<jobs_root>/<key>/`` on the shared filesystem.

The ledger files are LocalExecutor's (job.json, wrapper.json, log.txt, stop.json, exit.json; the
wrapper writes them from the compute node) plus ``slurm.json`` with the Slurm job id. Order on
launch: job.json (with the unique Slurm job name) is written *before* ``sbatch``, slurm.json after.
After a crash in between, the job is found again by name in ``squeue``: a key is never submitted
twice. Units run through ``slurm_unit.py``, which skips a unit that already succeeded, so a
requeued unit is not re-run; one requeued before it succeeded is followed to its rerun under the
same id (``requeue.py``). State comes from ``scontrol show job`` (``sacct`` is often disabled).

The run folder must be on a filesystem the compute nodes share (the ledger, the scripts and the
outputs are read and written in place, nothing is copied): ``detect_gpus`` (preflight) submits
a tiny probe job that reads a token from the run folder and fails the run clearly when it cannot.

GPU requests: ``spec.gpus`` gives the *count* (Slurm picks the devices and sets
CUDA_VISIBLE_DEVICES itself), as ``--gres=gpu:N`` or ``--gpus=N``. ``launch_array`` submits
per-GPU units (tuning fan-out) as one job array.

Servers (benchmarks) are batch jobs on nodes: ``tools/jobs/slurm/servers.py``.
"""
from __future__ import annotations

import math
import re
import secrets
import shlex
import shutil
import time
from pathlib import Path
from typing import Literal

from tools.base import ToolError
from tools.child_env import child_env
from tools.gpus import DetectGpusResult
from tools.jobs.executor import Capabilities, SameHostDefaults
from tools.jobs.ledger.files import ledger_keys, read_json, record_stop_request, tail_log, write_json
from tools.jobs.ledger.state import with_exit
from tools.jobs.outages import OutageWait
from tools.jobs.slurm import submissions
from tools.jobs.slurm.requeue import requeued
from tools.jobs.slurm.probe import PROBE_WAIT_S, detect_partition_gpus, probe_shared_folder
from tools.jobs.slurm.servers import NodeServers
from tools.jobs.slurm.query import (PENDING, RUNNING, SLURM_COMMANDS, SlurmJobInfo, cancel, run_slurm, show_job,
                                    squeue_ids, submitted_id)
from tools.jobs.spec import JobSpec, JobState

HERE = Path(__file__).parent
# The stdlib helpers a unit runs on the compute node, by the name their frozen copy has in the run.
HELPERS = {"wrapper.py": HERE.parent / "wrapper.py", "processes.py": HERE.parent / "processes.py",
           "slurm_unit.py": HERE / "unit.py",
           "slurm_serve.py": HERE / "serve.py"}
_SUBMIT_WAIT_S = 60.0  # a job.json without slurm.json younger than this may still be submitting


class SlurmExecutor(NodeServers, SameHostDefaults):
    name = "slurm"
    capabilities = Capabilities(servers_on_nodes=True, job_arrays=True, gpus_from_elsewhere=True,
                                jobs_on_other_nodes=True)

    def __init__(self, jobs_root: Path | str, *, partition: str | None = None, env: dict[str, str] | None = None,
                 python: str = "python3", gpu_request: Literal["gres", "gpus"] = "gres",
                 outage: OutageWait | None = None):
        self.outage = outage or OutageWait()  # polls wait out a short slurmctld outage (tools/jobs/outages.py)
        self.root = Path(jobs_root).resolve()
        self.partition = partition
        self.label = f"slurm:{partition}" if partition else "slurm"
        self.env = child_env(base=env)  # Slurm commands and, through --export, the jobs see only these
        self.python = self.host_python = python
        self.gpu_request = gpu_request
        for command in SLURM_COMMANDS:
            if shutil.which(command, path=self.env.get("PATH", "")) is None:
                raise ToolError(f"the Slurm command {command!r} is not on PATH; load Slurm "
                                "(e.g. `module load slurm`) or pick another --executor (local, ssh://user@host)")
        if partition is not None:
            self._check_partition(partition)
        self.namespace = self._namespace()

    def _check_partition(self, partition: str) -> None:
        shown = run_slurm(["scontrol", "show", "partition", partition], self.env, check=False)
        if shown.returncode != 0:
            known = run_slurm(["sinfo", "-h", "-o", "%R"], self.env, check=False).stdout.split()
            raise ToolError(f"Slurm partition {partition!r} does not exist; partitions here: "
                            f"{', '.join(sorted(set(known))) or 'none found'} (use --executor slurm:NAME)")

    def _namespace(self) -> str:
        """A random tag fixed per run (executor.json): Slurm job names are dsv4-<tag>-<key>."""
        record_path = self.root / "executor.json"
        record = read_json(record_path)
        if record is not None:
            if record.get("kind") != "slurm":
                raise ToolError(f"this run's jobs were launched with executor {record.get('url') or record.get('kind')!r}; "
                                "resume with that --executor or start a new run")
            return record["namespace"]
        self.root.mkdir(parents=True, exist_ok=True)
        namespace = secrets.token_hex(4)
        write_json(record_path, {"kind": "slurm", "namespace": namespace})
        return namespace

    def job_dir(self, key: str) -> Path:
        return self.root / key

    # -- preflight -------------------------------------------------------------------------
    def detect_gpus(self) -> DetectGpusResult:
        """GPUs per node of the partition (from its gres), after checking the nodes see the run folder."""
        return detect_partition_gpus(self)

    def probe_shared_folder(self, wait_s: float = PROBE_WAIT_S) -> str:
        """'' when a compute node read a token in the run folder (see ``slurm_probe.py``)."""
        return probe_shared_folder(self, wait_s)

    # -- launching -------------------------------------------------------------------------
    def launch(self, spec: JobSpec) -> JobState:
        return self.launch_array([spec], as_array=False)[0]

    def launch_array(self, specs: list[JobSpec], *, as_array: bool = True, max_parallel: int | None = None) -> list[JobState]:
        """Submit units (one per GPU, say) as ONE job array; keys already in the ledger re-attach.

        All units of one array share one resource request, so they must ask for the same number
        of GPUs and the same timeout.
        """
        keys = [s.key for s in specs]
        if len(set(keys)) != len(keys):
            raise ToolError(f"duplicate job keys in one array: {sorted(k for k in keys if keys.count(k) > 1)}")
        fresh = [s for s in specs if not self._attach_existing(s)]
        if fresh:
            self._submit(fresh, as_array=as_array or len(fresh) > 1, max_parallel=max_parallel)
        states = [self.poll(s.key) for s in specs]
        for state, spec in zip(states, specs, strict=True):
            state.attached = spec not in fresh
        return states

    def _attach_existing(self, spec: JobSpec) -> bool:
        folder = self.job_dir(spec.key)
        recorded = read_json(folder / "job.json")
        if recorded is None:
            submissions.refuse_if_still_active(self.root, spec.key, self.env)
            return False
        field = spec.differs_from(recorded)
        if field is not None:
            raise ToolError(f"job key {spec.key!r} already names a different job ({field} differs); "
                            "pick a new key or start a new run")
        if (folder / "slurm.json").exists() or (folder / "wrapper.json").exists():
            return True
        found = self._find_submitted(recorded)  # crashed between sbatch and slurm.json?
        if found:
            write_json(folder / "slurm.json", {"job_id": found, "recovered_by_name": recorded["slurm_name"]})
            return True
        return False  # intent only: nothing reached Slurm, submit it now

    def _find_submitted(self, recorded: dict) -> str | None:
        ids = squeue_ids(recorded["slurm_name"], self.env)
        index = recorded.get("slurm_array_index")
        for job_id in ids:
            if index is None or job_id.endswith(f"_{index}"):
                return job_id
        return None

    def _submit(self, specs: list[JobSpec], *, as_array: bool, max_parallel: int | None) -> None:
        first = specs[0]
        gpu_counts = {len(s.gpus) if s.gpus else 0 for s in specs}
        timeouts = {(s.timeout_s, s.grace_s) for s in specs}
        if len(gpu_counts) > 1 or len(timeouts) > 1:
            raise ToolError("units of one job array must ask for the same GPU count and timeout; "
                            "launch them as separate arrays")
        self._freeze_helpers()
        name = f"dsv4-{self.namespace}-{first.key if len(specs) == 1 else 'array-' + secrets.token_hex(3)}"
        for index, spec in enumerate(specs):
            folder = self.job_dir(spec.key)
            folder.mkdir(parents=True, exist_ok=True)
            job = spec.model_dump()
            job["env"] = {k: v for k, v in spec.child_env().items() if k != "CUDA_VISIBLE_DEVICES"}  # Slurm's to set
            job.update(intent_at=time.time(), slurm_name=name, slurm_array_index=index if as_array else None,
                       token=secrets.token_hex(16))  # the wrapper puts it into its job's environment
            write_json(folder / "job.json", job)  # intent first: a crash never double-submits
        script = self._batch_script(specs)
        script_path = self.root / f"{name}.sbatch"
        script_path.write_text(script)
        # Only the allow-listed variables by name (values from self.env); each job's own are in its job.json.
        argv = ["sbatch", "--parsable", f"--job-name={name}", "--requeue", f"--export={','.join(sorted(self.env))}",
                f"--output={self.root / (name + ('_%a' if as_array else '') + '.slurm.out')}",
                f"--chdir={first.cwd or self.job_dir(first.key)}"]
        if self.partition:
            argv.append(f"--partition={self.partition}")
        if gpu_counts != {0}:
            count = gpu_counts.pop()
            argv.append(f"--gres=gpu:{count}" if self.gpu_request == "gres" else f"--gpus={count}")
        if first.timeout_s:
            argv.append(f"--time={math.ceil((first.timeout_s + first.grace_s) / 60) + 1}")
        if as_array:
            argv.append(f"--array=0-{len(specs) - 1}" + (f"%{max_parallel}" if max_parallel else ""))
        submissions.record(self.root, {"slurm_name": name, "keys": [s.key for s in specs], "as_array": as_array})
        submitted = run_slurm([*argv, str(script_path)], self.env, check=False)
        if submitted.returncode != 0:
            for spec in specs:  # nothing reached Slurm: drop the intents so a retry submits
                (self.job_dir(spec.key) / "job.json").unlink(missing_ok=True)
            raise ToolError(f"sbatch refused the job: {submitted.stderr.strip()[-500:]} — fix the request "
                            "(partition, GPU count, time limit) or ask `sinfo` what the cluster offers")
        job_id = submitted_id(submitted.stdout)
        submissions.record(self.root, {"slurm_name": name, "job_id": job_id})
        for index, spec in enumerate(specs):
            write_json(self.job_dir(spec.key) / "slurm.json",
                        {"job_id": f"{job_id}_{index}" if as_array else job_id, "submitted_at": time.time()})

    def _freeze_helpers(self) -> None:
        """The copies of the stdlib helpers the units run, frozen for this run (shared folder)."""
        for name, source in HELPERS.items():
            if not (self.root / name).exists():
                shutil.copyfile(source, self.root / name)

    def _batch_script(self, specs: list[JobSpec]) -> str:
        dirs = " ".join(shlex.quote(str(self.job_dir(s.key))) for s in specs)
        unit = shlex.quote(str(self.root / "slurm_unit.py"))
        return (
            "#!/bin/bash\n# Written by dsv4-agent: one unit per array task; slurm_unit.py skips finished units.\n"
            "set -euo pipefail\n"
            f"job_dirs=({dirs})\n"
            'job_dir="${job_dirs[${SLURM_ARRAY_TASK_ID:-0}]}"\n'
            f'exec -- {shlex.quote(self.python)} -S {unit} "$job_dir"\n'
        )

    # -- observing -------------------------------------------------------------------------
    def poll(self, key: str) -> JobState:
        folder = self.job_dir(key)
        job = read_json(folder / "job.json")
        if job is None:
            raise ToolError(f"no job {key!r} in {self.root}; `dsv4-agent jobs RUN` lists the run's jobs")
        slurm = read_json(folder / "slurm.json") or {}
        wrapper = read_json(folder / "wrapper.json") or {}
        state = JobState(key=key, status="launching", kind=job.get("kind", "other"), lane=job.get("lane", "gpu"),
                         gpus=job.get("gpus"), pid=wrapper.get("pid"), child_pgid=wrapper.get("child_pgid"),
                         launched_at=slurm.get("submitted_at"), log_path=str(folder / "log.txt"))
        ended = read_json(folder / "exit.json")
        if ended is not None:
            return requeued(state, ended, slurm, folder, self.env, self.outage) or with_exit(state, ended, job)
        if not slurm:
            if time.time() - job.get("intent_at", 0) > _SUBMIT_WAIT_S:
                state.status, state.reason = "lost", "submit intent recorded but no Slurm job was found"
            return state
        info = show_job(slurm["job_id"], self.env, self.outage)
        return self._state_from_slurm(state, info, folder, slurm["job_id"])

    @staticmethod
    def _state_from_slurm(state: JobState, info: SlurmJobInfo | None, folder: Path, job_id: str) -> JobState:
        if info is None:
            state.status, state.reason = "lost", f"Slurm no longer knows job {job_id} and it recorded no exit"
        elif info.state in PENDING:
            state.reason = f"Slurm job {job_id} {info.state.lower()}: {info.reason}"
        elif info.state in RUNNING:
            if (folder / "wrapper.json").exists():  # slurm_unit.py removes a previous attempt's
                state.status, state.reason = "running", f"Slurm job {job_id} on {info.node_list}"
            else:
                state.reason = f"Slurm job {job_id} started on {info.node_list}; its wrapper is starting"
        elif (folder / "exit.json").exists():  # written between our two reads
            return state
        elif (folder / "stop.json").exists():
            state.status, state.reason = "stopped", f"Slurm job {job_id} ended {info.state} after our stop request"
        else:
            state.status, state.reason = "lost", (f"Slurm job {job_id} ended {info.state} without a recorded exit "
                                                  f"(can {info.node_list or 'the node'} write to {folder}?)")
        return state

    def read_log(self, key: str, max_chars: int = 4000) -> str:
        return tail_log(self.job_dir(key), max_chars)

    def jobs(self) -> list[JobState]:
        return [self.poll(key) for key in ledger_keys(self.root)]

    # -- stopping --------------------------------------------------------------------------
    def stop(self, key: str, grace_s: float | None = None) -> JobState:
        """SIGTERM the unit's wrapper through Slurm; scancel the job after the grace."""
        state = self.poll(key)
        if state.done:
            return state
        folder = self.job_dir(key)
        grace = record_stop_request(folder, grace_s)
        job_id = (read_json(folder / "slurm.json") or {}).get("job_id")
        if job_id is None:
            job_id = self._find_submitted(read_json(folder / "job.json") or {})
        if job_id is None:
            return self.poll(key)
        # Slurm itself checks the proof: scancel acts on the id only if the job has the name we gave it
        # (dsv4-<run tag>-<key>), so a ledger naming someone else's job id cancels nothing.
        name = (read_json(folder / "job.json") or {}).get("slurm_name")
        if not (isinstance(name, str) and re.fullmatch(r"dsv4-[0-9a-f]+-[A-Za-z0-9._-]+", name)):
            raise ToolError(f"job {key!r} was not stopped: its job.json names no job name of ours ({name!r}), so "
                            f"Slurm job {job_id} cannot be proven to be it; check it with `scontrol show job "
                            f"{job_id}` and cancel it by hand with `scancel {job_id}` if it is")
        if state.status == "running":
            cancel(job_id, self.env, f"--name={name}", "--batch", "--signal=TERM")
            deadline = time.monotonic() + grace + 5.0
            while time.monotonic() < deadline and self.poll(key).status == "running":
                time.sleep(0.2)
        cancel(job_id, self.env, f"--name={name}")  # ends whatever is left, pending or running
        deadline = time.monotonic() + 30.0
        state = self.poll(key)
        while not state.done and time.monotonic() < deadline:
            time.sleep(0.3)
            state = self.poll(key)
        return state
