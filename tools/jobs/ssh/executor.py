"""SshExecutor: jobs on another host through the system ``ssh``, ledger kept on that host.

Every operation is one ``ssh HOST python3 -c <remote_ledger.py> OP`` call with a JSON request on
stdin (see ``remote_ledger.py``), on a connection the calls share (``multiplex.py``). ``launch``
copies the job spec and the standalone ``wrapper.py`` into ``<remote_root>/<key>/`` and starts it
detached there (new session, SIGHUP ignored), so the job outlives both the agent and the SSH
connection. The remote ledger is the truth: a restarted agent (or one on another laptop holding the
same run folder) re-attaches by key and never starts a second copy. ``poll`` mirrors ``log.txt`` into the local ``job_dir(key)`` incrementally and, once
the job has ended, fetches the whole remote job folder (exit.json, result files) once.

Files: the run has a folder of its own on the host (``~/.dsv4-agent/runs/<run>-<tag>``, ledger in
its ``jobs/``). Paths of the local run folder in a job's argv/env/cwd are rewritten to that copy,
the job's inputs are mirrored there before it starts and its outputs fetched back after it ended;
settings paths (SGLang checkout, model, SGLang python) are taken as paths on the host. The exact
rule is in ``ssh_paths.py``. ``detect_gpus`` asks the host's ``nvidia-smi``.

Which remote folder a run uses is fixed the first time and written to ``<jobs_root>/executor.json``;
authentication is the user's own (ssh-agent, ~/.ssh/config) plus ``ssh_options``; ``BatchMode`` is
always on so that a missing key fails fast instead of prompting.
"""
from __future__ import annotations

import base64
import io
import json
import os
import secrets
import tarfile
from pathlib import Path

from tools.base import ToolError
from tools.gpus import APPS_QUERY, GPU_QUERY, DetectGpusResult, from_queries
from tools.jobs import job_folder
from tools.jobs.executor import Capabilities
from tools.jobs.ledger.files import read_json, write_json
from tools.jobs.executor_spec import ExecutorSpec
from tools.jobs.ledger.state import state_from_snapshot
from tools.jobs.outages import OutageWait
from tools.jobs.spec import JobSpec, JobState
from tools.jobs.ssh.forward import PortForward
from tools.jobs.ssh.multiplex import shared_options
from tools.jobs.ssh.paths import RunPathMap
from tools.jobs.ssh.transport import PROCESSES_SOURCE, OP_TIMEOUT_S, WRAPPER_SOURCE, SshTransport, parse_ssh_target

HOST_PROCESSES = "host_processes.json"  # the job's wrapper.json as last seen on the host, kept in the local mirror
POLL_WAIT_S = 1.0  # a poll of a running job answers within this (sooner when the job ends or its wrapper dies)


class SshExecutor(SshTransport):
    name = "ssh"
    capabilities = Capabilities(remote_host=True, gpus_from_elsewhere=True)

    def __init__(self, url: ExecutorSpec | str, jobs_root: Path | str, *, ssh_options: list[str] | None = None,
                 remote_root: str | None = None, remote_python: str = "python3",
                 connect_timeout_s: int = 10, nvidia_smi: str = "nvidia-smi", outage: OutageWait | None = None):
        self.url = str(url)
        self.destination, self.port = parse_ssh_target(self.url)
        self.label = self.url
        self.root = Path(jobs_root)
        self.ssh_options = list(ssh_options or [])
        self.shared_connection = shared_options(self.destination, self.port, self.ssh_options)
        self.remote_python = self.host_python = remote_python
        self.connect_timeout_s = connect_timeout_s
        self.nvidia_smi = nvidia_smi
        self.outage = outage or OutageWait()  # a host that answered before is waited for (tools/jobs/outages.py)
        self.remote_root = self._remote_root(remote_root)
        self.answered = bool((read_json(self.root / "executor.json") or {}).get("remote_run_abs"))  # the run reached it
        self._paths: RunPathMap | None = None
        self._last_job: dict[str, dict] = {}  # job.json as last seen remotely (for the stop grace)
        self._forwards: dict[str, PortForward] = {}  # job key -> our ssh -L to that (server) job
        self._seen_processes: dict[str, dict] = {}  # job key -> the wrapper.json last written to HOST_PROCESSES

    def _remote_root(self, wanted: str | None) -> str:
        """The remote ledger folder of this run: fixed once, remembered in executor.json."""
        record_path = self.root / "executor.json"
        try:
            record = json.loads(record_path.read_text())
        except FileNotFoundError:
            record = None
        except json.JSONDecodeError as err:
            raise ToolError(f"{record_path} is not valid JSON ({err}); restore it from the run folder's copy") from err
        if record is not None:
            if record.get("kind") != "ssh" or record.get("url") != self.url:
                raise ToolError(
                    f"this run's jobs were launched with executor {record.get('url') or record.get('kind')!r}, "
                    f"not {self.url!r}; resume with that --executor or start a new run"
                )
            if wanted is not None and wanted != record["remote_root"]:
                raise ToolError(f"this run's remote ledger is {record['remote_root']!r}, not {wanted!r}; "
                                "drop the remote root option to re-attach")
            self.remote_run = record.get("remote_run") or record["remote_root"].rstrip("/") + "-run"
            return record["remote_root"]
        run_name = self.root.resolve().parent.name or "run"
        self.remote_run = f".dsv4-agent/runs/{run_name}-{secrets.token_hex(4)}"
        root = wanted or f"{self.remote_run}/jobs"
        self._write_record({"kind": "ssh", "url": self.url, "remote_root": root, "remote_run": self.remote_run})
        return root

    def _write_record(self, record: dict) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        record_path = self.root / "executor.json"
        tmp = record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=1))
        os.replace(tmp, record_path)

    def paths(self) -> RunPathMap:
        """Local run folder -> its copy on the host (absolute there: jobs change directory)."""
        if self._paths is None:
            record = json.loads((self.root / "executor.json").read_text())
            if not record.get("remote_run_abs"):
                record["remote_run"] = self.remote_run
                record["remote_run_abs"] = self._call("put", {"run": self.remote_run, "files": []})["run"]
                self._write_record(record)
            self._paths = RunPathMap(self.root.resolve().parent, record["remote_run_abs"])
        return self._paths

    # -- the Executor interface ------------------------------------------------------------
    def job_dir(self, key: str) -> Path:
        return self.root / key

    def detect_gpus(self) -> DetectGpusResult:
        """The GPUs of the host, from its own ``nvidia-smi`` (ssh failures raise ToolError)."""
        answer = self._call("gpus", {"nvidia_smi": self.nvidia_smi, "queries": [GPU_QUERY, APPS_QUERY]})
        where = f"{self.nvidia_smi} on {self.url}"
        if answer.get("missing"):
            return DetectGpusResult(gpus=[], note=f"{where} not found: no NVIDIA GPU on that host "
                                                  "(or give its path with the nvidia_smi setting)")
        gpus, apps = (tuple(a) for a in answer["answers"])
        return from_queries(gpus, apps, where, answer.get("cuda_visible_devices"))

    def launch(self, spec: JobSpec) -> JobState:
        paths = self.paths()
        job = spec.model_dump()
        job["env"] = spec.child_env()
        job["token"] = secrets.token_hex(16)  # the proof a process is this job's (tools/jobs/processes.py)
        job = paths.rewrite(job)
        answer = self._call("launch", {"key": spec.key, "job": job, "wrapper_source": WRAPPER_SOURCE,
                                       "processes_source": PROCESSES_SOURCE,
                                       "run": paths.remote_run, "inputs": paths.inputs(spec),
                                       "folders": paths.folders(spec), "previous": self._host_processes(spec.key)})
        if answer.get("orphaned"):
            raise ToolError(job_folder.orphan_refusal(spec.key, answer["folder"], answer["orphaned"], self.url))
        folder = self.job_dir(spec.key)
        folder.mkdir(parents=True, exist_ok=True)
        if not answer["attached"]:  # a new job: what was run (host paths), readable here while it runs
            (folder / "fetched.json").unlink(missing_ok=True)
            write_json(folder / "job.json", answer["snapshot"].get("job") or job)
            (folder / HOST_PROCESSES).unlink(missing_ok=True)
        elif not (folder / "job.json").exists():
            write_json(folder / "job.json", answer["snapshot"].get("job") or job)
        state = self._sync(spec.key, answer["snapshot"])
        state.attached = answer["attached"]
        return state

    def launch_array(self, specs: list[JobSpec]) -> list[JobState]:
        return [self.launch(spec) for spec in specs]

    def poll(self, key: str) -> JobState:
        """The job's state, after watching it on the host for up to ``POLL_WAIT_S`` while it plainly
        runs: every caller polls in a loop, and an ssh call costs a connection, a login shell and a
        Python start on both ends (about a third of a core-second here), while the watch is file reads."""
        return self._poll_many([key], wait_s=POLL_WAIT_S)[0]

    def _poll_many(self, keys: list[str], wait_s: float = 0.0) -> list[JobState]:
        offsets = {k: self._local_log_size(k) for k in keys}
        answer = self._call("poll", {"keys": offsets, "wait_s": wait_s})
        states = []
        for key in keys:
            entry = answer["jobs"][key]
            if entry["snapshot"]["job"] is None:
                raise ToolError(f"no job {key!r} in the remote ledger {self.remote_root} on {self.url}; "
                                "`dsv4-agent jobs RUN` lists the run's jobs")
            self._append_log(key, entry["log_offset"], base64.b64decode(entry["log"]))
            states.append(self._sync(key, entry["snapshot"]))
        return states

    def _local_log_size(self, key: str) -> int:
        try:
            return (self.job_dir(key) / "log.txt").stat().st_size
        except FileNotFoundError:
            return 0

    def _append_log(self, key: str, offset: int, data: bytes) -> None:
        folder = self.job_dir(key)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "log.txt", "r+b" if (folder / "log.txt").exists() else "wb") as f:
            f.truncate(offset)  # offset < local size only when the remote log was replaced
            f.seek(offset)
            f.write(data)

    def _host_processes(self, key: str) -> dict | None:
        """What this agent last saw run of the job on the host (wrapper.json's fields) and its token."""
        seen = read_json(self.job_dir(key) / HOST_PROCESSES)
        token = job_folder.job_token(read_json(self.job_dir(key) / "job.json"))
        return dict(seen, token=token) if isinstance(seen, dict) and token else None

    def _sync(self, key: str, snap: dict) -> JobState:
        """State from the snapshot; once the job has ended, fetch its whole folder (once)."""
        self._last_job[key] = snap.get("job") or {}
        seen = snap.get("wrapper")
        if isinstance(seen, dict) and seen.get("child_pgid") and self._seen_processes.get(key) != seen:
            write_json(self.job_dir(key) / HOST_PROCESSES, seen)  # finds its processes if its folder is lost
            self._seen_processes[key] = seen
        state = state_from_snapshot(key, snap, str(self.job_dir(key) / "log.txt"))
        if state.done and not (self.job_dir(key) / "fetched.json").exists():
            self._fetch(key, (snap.get("job") or {}).get("cwd"))
        return state

    def _fetch(self, key: str, remote_cwd: str | None) -> None:
        folder = self.job_dir(key)
        blob = self._call("pack", {"key": key}, raw=True)
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
            tar.extractall(folder, filter="data")  # refuses absolute paths, links out, devices
        outputs = self._fetch_outputs(remote_cwd)
        (folder / "fetched.json").write_text(json.dumps({"from": self.url, "remote_dir": f"{self.remote_root}/{key}",
                                                         "outputs": outputs}))

    def _fetch_outputs(self, remote_cwd: str | None) -> str | None:
        """The job's working folder, when it is in the run folder: subfolders (outputs) come back,
        top-level files only when missing here (they are the inputs we sent)."""
        paths = self.paths()
        prefix = paths.remote_run + "/"
        if not remote_cwd or not remote_cwd.startswith(prefix):
            return None
        relative = remote_cwd[len(prefix):]
        local = paths.local_run / relative
        if paths.relative(str(local)) is None:
            return None
        blob = self._call("pack_dir", {"run": paths.remote_run, "path": relative}, raw=True)
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
            members = [m for m in tar.getmembers() if "/" in m.name or m.isdir() or not (local / m.name).exists()]
            tar.extractall(local, members=members, filter="data")
        return relative

    def read_log(self, key: str, max_chars: int = 4000) -> str:
        self._poll_many([key])  # brings the local mirror up to date, now
        with open(self.job_dir(key) / "log.txt", "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - max_chars))
            return f.read().decode("utf-8", errors="replace")

    def jobs(self) -> list[JobState]:
        keys = self._call("list", {})["keys"]
        return self._poll_many(keys) if keys else []

    # -- reaching what jobs serve or write on the host ---------------------------------------
    def free_port(self, host: str = "127.0.0.1") -> int:
        """A port free right now on the host (for a server job that runs there)."""
        return int(self._call("port", {"host": host})["port"])

    def forward(self, key: str, host: str, port: int) -> str:
        """A local URL reaching ``host:port`` as seen from the SSH host (``ssh -L``, ours to stop);
        closed by ``stop(key)`` or ``close_forward(key)``."""
        current = self._forwards.get(key)
        if current is not None and current.alive() and (current.remote_host, current.remote_port) == (host, port):
            return current.url
        self.close_forward(key)
        self._forwards[key] = PortForward(self._ssh_prefix(shared=False), self.destination, host, port,
                                          self.job_dir(key))
        return self._forwards[key].url

    def close_forward(self, key: str) -> None:
        forward = self._forwards.pop(key, None)
        if forward is not None:
            forward.close()

    reach, release = forward, close_forward

    def job_listens(self, key: str, port: int) -> bool:
        """True when the job's own process group listens on ``port`` on the host (checked there)."""
        return bool(self._call("listens", {"key": key, "port": int(port)})["listens"])

    def fetch_run_file(self, local_path: Path) -> bool:
        """Copy one run-folder file a job wrote on the host to the same path here (False: not there)."""
        paths = self.paths()
        rel = paths.relative(str(local_path))
        if rel is None:
            raise ToolError(f"{local_path} is not inside the run folder {paths.local_run}; only run-folder files "
                            "come back from the GPU host")
        answer = self._call("get", {"run": paths.remote_run, "path": str(rel)})
        if answer.get("missing"):
            return False
        target = paths.local_run / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.fetch.tmp")
        tmp.write_bytes(base64.b64decode(answer["data"]))
        os.replace(tmp, target)
        return True

    def stop(self, key: str, grace_s: float | None = None) -> JobState:
        """SIGTERM the remote wrapper (it ends the command's group), SIGKILL after the grace."""
        self.close_forward(key)
        state = self._poll_many([key])[0]  # no watch: the stop goes out now
        if state.done and state.status != "lost":  # a lost job may still name a process we cannot vouch for
            return state
        grace = self._last_job.get(key, {}).get("grace_s", 10.0) if grace_s is None else grace_s
        answer = self._call("stop", {"key": key, "grace_s": grace}, timeout_s=OP_TIMEOUT_S + grace)
        if answer.get("refused"):
            raise ToolError(f"job {key!r} on {self.url} was not stopped: {answer['refused']}")
        return self._sync(key, answer["snapshot"])
