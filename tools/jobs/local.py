"""LocalExecutor: jobs on this machine, detached, with the ledger in ``<jobs_root>/<key>/``.

Per job folder:
  job.json      the spec plus ``intent_at``; written *before* anything starts
  launch.json   wrapper pid and its process start time; written right after the start
  wrapper.json  written by the wrapper itself: its pid and the command's process group
  log.txt       stdout+stderr of the command
  stop.json     written when the agent asked for a stop
  exit.json     written by the wrapper when the command ended (exit code, reason)

Jobs outlive the agent (own session, SIGHUP ignored); a restarted agent re-attaches by key.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tools.base import ToolError
from tools.jobs.ledger.files import ledger_keys, read_json, record_stop_request, tail_log, write_json
from tools.jobs.ledger.state import SPAWN_WAIT_S, state_from_snapshot
from tools.jobs.spec import JobSpec, JobState

WRAPPER = Path(__file__).with_name("wrapper.py")


def _check_same(spec: JobSpec, recorded: dict) -> None:
    field = spec.differs_from(recorded)
    if field is not None:
        raise ToolError(f"job key {spec.key!r} already names a different job ({field} differs); "
                        "pick a new key or start a new run")


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (guards against pid reuse); None if gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None
    return fields[19]


class LocalExecutor:
    name = "local"

    def __init__(self, jobs_root: Path | str, base_env: dict[str, str] | None = None):
        self.root = Path(jobs_root)
        self.base_env = base_env
        self._children: dict[str, subprocess.Popen] = {}  # reaped by poll, so no zombies linger

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
        folder.mkdir(parents=True, exist_ok=True)
        job = spec.model_dump()
        job["env"] = spec.child_env()
        job["intent_at"] = time.time()
        write_json(folder / "job.json", job)  # intent first: a crash after this never double-launches
        env = dict(os.environ if self.base_env is None else self.base_env)
        try:
            proc = subprocess.Popen(
                [sys.executable, str(WRAPPER), str(folder.resolve())],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=open(folder / "wrapper.err", "ab"), start_new_session=True, close_fds=True,
            )
        except OSError as err:
            raise ToolError(f"could not start job {spec.key!r}: {err}") from err
        self._children[spec.key] = proc
        write_json(folder / "launch.json", {"pid": proc.pid, "start_time": process_start_time(proc.pid),
                                             "launched_at": time.time()})
        self._await_wrapper(folder)
        return self.poll(spec.key)

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
        folder = self.job_dir(key)
        job = read_json(folder / "job.json")
        if job is None:
            raise ToolError(f"no job {key!r} in {self.root}; `dsv4-agent jobs RUN` lists the run's jobs")
        proc = self._children.get(key)
        if proc is not None:
            proc.poll()
        launch = read_json(folder / "launch.json")
        wrapper = read_json(folder / "wrapper.json")
        snapshot = {"job": job, "launch": launch, "wrapper": wrapper, "exit": read_json(folder / "exit.json"),
                    "stop": (folder / "stop.json").exists(), "now": time.time(),
                    "alive": self._wrapper_alive(launch or {}, wrapper or {})}
        return state_from_snapshot(key, snapshot, str(folder / "log.txt"))

    @staticmethod
    def _wrapper_alive(launch: dict, wrapper: dict) -> bool:
        pid = launch.get("pid") or wrapper.get("pid")
        if not pid:
            return False
        started = process_start_time(pid)
        if started is None:
            return False
        recorded = launch.get("start_time")
        return recorded is None or recorded == started

    def read_log(self, key: str, max_chars: int = 4000) -> str:
        return tail_log(self.job_dir(key), max_chars)

    def jobs(self) -> list[JobState]:
        return [self.poll(key) for key in ledger_keys(self.root)]

    # -- stopping --------------------------------------------------------------------------
    def stop(self, key: str, grace_s: float | None = None) -> JobState:
        """SIGTERM the job (the wrapper ends the command's group), SIGKILL after the grace."""
        state = self.poll(key)
        if state.done:
            return state
        folder = self.job_dir(key)
        grace = record_stop_request(folder, grace_s)
        launch = read_json(folder / "launch.json") or {}
        wrapper = read_json(folder / "wrapper.json") or {}
        if self._wrapper_alive(launch, wrapper):  # only a process whose start time we recorded
            os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace + 5.0
        while time.monotonic() < deadline:
            state = self.poll(key)
            if state.done:
                return state
            time.sleep(0.1)
        # The wrapper did not finish in time: kill both groups we started, nothing else.
        for pgid in (state.child_pgid, state.pid if self._wrapper_alive(launch, wrapper) else None):
            if pgid:
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        time.sleep(0.1)
        return self.poll(key)
