"""LocalExecutor: jobs on this machine, detached, with the ledger in ``<jobs_root>/<key>/``.

The ledger files of one job (job.json, launch.json, wrapper.json, command_exit.json, stop.json,
exit.json, log.txt) are described in ``job_folder.py``, which also decides what is alive and what
may be signalled. Jobs outlive the agent (own session, SIGHUP ignored) and their wrapper (the job
is its own process group); a restarted agent re-attaches by key.
"""
from __future__ import annotations

import secrets
import subprocess
import sys
import time
from pathlib import Path

from tools.base import ToolError
from tools.gpus import DetectGpusArgs, DetectGpusResult, detect_gpus
from tools.jobs import job_folder, processes
from tools.jobs.executor import SameHostDefaults
from tools.jobs.ledger.files import ledger_keys, read_json, tail_log, write_json
from tools.jobs.ledger.listing import ledger_state
from tools.jobs.ledger.state import SPAWN_WAIT_S, job_state
from tools.jobs.spec import JobSpec, JobState
from tools.child_env import child_env

WRAPPER = Path(__file__).with_name("wrapper.py")


def _check_same(spec: JobSpec, recorded: dict) -> None:
    field = spec.differs_from(recorded)
    if field is not None:
        raise ToolError(f"job key {spec.key!r} already names a different job ({field} differs); "
                        "pick a new key or start a new run")


class LocalExecutor(SameHostDefaults):
    name = "local"
    label = "local"

    def __init__(self, jobs_root: Path | str, base_env: dict[str, str] | None = None, nvidia_smi: str = "nvidia-smi"):
        self.root = Path(jobs_root)
        self.base_env = base_env
        self.nvidia_smi = nvidia_smi
        self._children: dict[str, subprocess.Popen] = {}  # reaped by poll, so no zombies linger

    def detect_gpus(self) -> DetectGpusResult:
        """This machine's GPUs (``nvidia-smi``), as far as CUDA_VISIBLE_DEVICES lets jobs see them."""
        return detect_gpus(DetectGpusArgs(nvidia_smi=self.nvidia_smi))

    def job_listens(self, key: str, port: int) -> bool:
        """True when the job's own process group holds a socket listening on ``port`` here."""
        wrapper = read_json(self.job_dir(key) / "wrapper.json") or {}
        token = job_folder.job_token(read_json(self.job_dir(key) / "job.json"))
        return processes.group_listens(wrapper.get("child_pgid"), wrapper.get("child_start_time"), port, token)

    def job_dir(self, key: str) -> Path:
        return self.root / key

    # -- launching -------------------------------------------------------------------------
    def launch(self, spec: JobSpec) -> JobState:
        folder = self.job_dir(spec.key)
        recorded = read_json(folder / "job.json")
        if recorded is not None:
            _check_same(spec, recorded)
            if not self._never_started(folder, recorded):
                state = self.poll(spec.key)
                state.attached = True
                return state
        if recorded is None:
            self._refuse_if_still_running(spec.key, folder)
        folder.mkdir(parents=True, exist_ok=True)
        job = spec.model_dump()
        job["env"] = spec.child_env()
        job["intent_at"] = time.time()
        job["token"] = secrets.token_hex(16)  # the proof a process is this job's (tools/jobs/processes.py)
        write_json(folder / "job.json", job)  # intent first: a crash after this never double-launches
        env = child_env({processes.TOKEN_VARIABLE: job["token"]}, base=self.base_env)
        env[processes.JOB_DIR_ENV] = str(folder.resolve())  # finds the job's processes if its folder is lost
        try:
            with open(folder / "wrapper.err", "ab") as wrapper_err:  # the wrapper keeps its own copy of the fd
                proc = subprocess.Popen(
                    [sys.executable, "-S", str(WRAPPER), str(folder.resolve())],  # stdlib only: no site
                    env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=wrapper_err, start_new_session=True, close_fds=True,
                )
        except OSError as err:
            raise ToolError(f"could not start job {spec.key!r}: {err}") from err
        self._children[spec.key] = proc
        write_json(folder / "launch.json", {"pid": proc.pid, "start_time": processes.start_time(proc.pid),
                                             "launched_at": time.time()})
        self._await_wrapper(folder)
        return self.poll(spec.key)

    @staticmethod
    def _refuse_if_still_running(key: str, folder: Path) -> None:
        """A key with no ledger may still have processes: its folder was deleted while it ran."""
        found = job_folder.orphans(folder)
        if found:
            raise ToolError(job_folder.orphan_refusal(key, folder, found))

    def _never_started(self, folder: Path, recorded: dict) -> bool:
        """True only when an intent was written but no process was ever started for it."""
        if (folder / "launch.json").exists() or (folder / "wrapper.json").exists():
            return False
        deadline = recorded.get("intent_at", 0) + SPAWN_WAIT_S
        while time.time() < deadline:
            time.sleep(0.1)
            if (folder / "launch.json").exists() or (folder / "wrapper.json").exists():
                return False
        return True

    @staticmethod
    def _await_wrapper(folder: Path) -> None:
        deadline = time.monotonic() + SPAWN_WAIT_S
        while time.monotonic() < deadline and not (folder / "wrapper.json").exists():
            time.sleep(0.02)

    # -- observing -------------------------------------------------------------------------
    def poll(self, key: str) -> JobState:
        proc = self._children.get(key)
        if proc is not None:
            proc.poll()
        return job_state(ledger_state(self.root, key))

    def read_log(self, key: str, max_chars: int = 4000) -> str:
        return tail_log(self.job_dir(key), max_chars)

    def jobs(self) -> list[JobState]:
        return [self.poll(key) for key in ledger_keys(self.root)]

    # -- stopping --------------------------------------------------------------------------
    def stop(self, key: str, grace_s: float | None = None) -> JobState:
        """SIGTERM the job (the wrapper ends the command's group), SIGKILL after the grace; only
        processes whose start time the ledger recorded are signalled. ToolError says why when the
        job could not be stopped (no such proof, or its processes outlived SIGKILL). A job that has
        ended is looked at too: a process left in its group may still hold a GPU."""
        self.poll(key)
        folder = self.job_dir(key)
        job = read_json(folder / "job.json") or {}
        answer = job_folder.stop(str(folder), job.get("grace_s", 10.0) if grace_s is None else grace_s)
        if answer.get("refused"):
            raise ToolError(f"job {key!r} was not stopped: {answer['refused']}")
        return self.poll(key)
