"""The run folder ``runs/<UTC time>-<slug>/`` and its lock.

A run is finished only when ``result.json`` exists; it is written last, atomically. The lock
(``.lock``, an flock held for the agent's lifetime) stops a second agent from driving the run;
the kernel drops it when the holder dies, so a crashed run can be resumed at once.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shlex
import shutil
import stat
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tools import json_data
from agent.exit_codes import RUN_STATUSES, RunStatus
from agent.secrets import redact_text
from agent.run.run_files import CONFIG, PREFLIGHT, RESULT, RunFiles, RunFolderError, damaged, read_run_json, step_file
from agent.terminal.printable import printable

READ_IN_A_TERMINAL = (".md", ".txt", ".html")  # run files people `cat`: control characters escaped
REUSABLE_STATUSES = ("done", "skipped")  # step outcomes a resumed or re-driven campaign reuses (agent/campaign/lanes.py)


def read_result(path: Path) -> dict | None:
    """A run's result file (``result.json``, ``result.attempt-N.json``): None when it is not there,
    RunFolderError (one line naming the file and the fix) when it holds no result. The agent writes
    it atomically, so a bad one was damaged afterwards; the trace still holds how each attempt ended."""
    where, bad, run = (shlex.quote(str(p)) for p in (path, f"{path}.bad", path.parent))
    fix = f"move it away (`mv {where} {bad}`): `dsv4-agent resume {run}` then writes it again from the trace"
    data = read_run_json(path, fix)
    if data is not None and data.get("status") not in RUN_STATUSES:
        raise damaged(path, f"not a result (status {data.get('status')!r} is none of {', '.join(RUN_STATUSES)})", fix)
    return data


def slugify(goal: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", goal.lower()).strip("-")
    return (slug[:limit].rstrip("-")) or "campaign"


class RunFolder(RunFiles):
    """A run folder to write to (atomically, secrets redacted) and lock; reading is ``RunFiles``'."""

    def __init__(self, path: Path | str):
        super().__init__(path)
        self._lock_file = None

    # -- creation / lookup -------------------------------------------------------------------
    @classmethod
    def create(cls, runs_dir: Path | str, goal: str, now: datetime | None = None) -> "RunFolder":
        runs = Path(runs_dir)
        try:
            runs.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RunFolderError(f"cannot create runs dir {runs}: {err.strerror}; pass --runs-dir DIR") from None
        if not os.access(runs, os.W_OK | os.X_OK):
            raise RunFolderError(f"runs dir {runs} is not writable; pass --runs-dir DIR")
        stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
        base = f"{stamp}-{slugify(goal)}"
        for n in range(100):
            path = runs / (base if n == 0 else f"{base}-{n}")
            try:
                path.mkdir()
                return cls(path)
            except FileExistsError:
                continue
        raise RunFolderError(f"too many runs named {base} in {runs}")

    @classmethod
    def find(cls, ref: str, runs_dir: Path | str) -> "RunFolder":
        """A run by path, by folder name under runs_dir, or 'latest'."""
        candidates = [Path(ref), Path(runs_dir) / ref]
        if ref == "latest":
            runs = sorted(p for p in Path(runs_dir).glob("*") if (p / CONFIG).exists())
            candidates = runs[-1:]
        for path in candidates:
            if (path / CONFIG).exists():
                if special := _placed_special(path):  # every command reads run files: none may block it
                    raise RunFolderError(special)
                return cls(path)
        listing = "dsv4-agent runs" + ("" if str(runs_dir) == "runs" else f" --runs-dir {shlex.quote(str(runs_dir))}")
        raise RunFolderError(f"no run {ref!r} (looked for a folder with config.json at "
                             f"{', '.join(str(c) for c in candidates) or runs_dir}); "
                             f"`{listing}` lists the runs")

    # -- files ---------------------------------------------------------------------------------
    def file(self, relative: str) -> Path:
        path = (self.path / relative).resolve()
        if not path.is_relative_to(self.path.resolve()):
            raise RunFolderError(f"{relative!r} points outside the run folder")
        return path

    def write_text(self, relative: str, text: str, mode: int | None = None) -> Path:
        """Write a run file atomically, with every known secret redacted (``agent/secrets.py``); in the
        files a person reads with ``cat`` (``.md``, ``.txt``, ``.html``) control characters are written
        escaped (``\\x1b``), as the terminal shows them (``agent/terminal/printable.py``)."""
        text = redact_text(text)
        if relative.endswith(READ_IN_A_TERMINAL):
            text = printable(text)
        path = self.file(relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        try:
            with open(tmp, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, path)
        except OSError:  # a full disk, say: the old file stays whole and no half-written copy is left
            tmp.unlink(missing_ok=True)
            raise
        return path

    def write_json(self, relative: str, data: Any) -> Path:
        return self.write_text(relative, json.dumps(data, indent=2, default=str) + "\n")

    @property
    def trace_path(self) -> Path:
        return self.path / "trace.jsonl"

    @property
    def checkpoint_path(self) -> Path:
        return self.path / "checkpoint.sqlite"

    @property
    def jobs_dir(self) -> Path:
        return self.path / "jobs"

    @property
    def result(self) -> dict | None:
        """result.json, or None before it is written; RunFolderError when it is not a result."""
        return read_result(self.path / RESULT)

    def result_fields(self, status: str, plan_only: bool) -> dict:
        """What result.json says beside status and summary, read from the run folder."""
        outcomes = {kind: outcome.status for kind, outcome in self.step_outcomes().items()}
        extra: dict[str, Any] = {"run": str(self.path), "steps": outcomes}
        verdict = self.verdict()
        if verdict is not None:  # the decision travels with the result (tools/measure/verdict.py)
            extra["verdict"] = verdict.model_dump(mode="json")
        report = self.path / "report.html"
        if report.exists():
            extra["report"] = str(report)
        if status == "planned" and plan_only:
            extra["next"] = f"review the scripts in {self.path}, then: dsv4-agent resume {self.path}"
        elif status == "planned":  # the GPU host is elsewhere: reached over SSH from here, or handed the run
            here, name = shlex.quote(str(self.path)), shlex.quote(self.path.name + ".tar.gz")
            extra["next"] = (f"with SSH to the GPU host, from here: `dsv4-agent resume {here} --executor ssh://HOST "
                             f"--sglang-python PATH`; without: `dsv4-agent bundle {here}`, copy {name} to the GPU "
                             f"host and there `dsv4-agent resume {name} --sglang-python PATH` (docs/workflow.md)")
        return extra

    def forget_outcomes(self, kinds: list[str]) -> list[str]:
        """Drop the reusable outcomes of these steps (their trace events stay): the next attempt runs
        them again. Returns the kinds that had one."""
        dropped = []
        for kind in kinds:
            outcome = self.step_outcome(kind)
            if outcome is not None and outcome.status in REUSABLE_STATUSES:
                (self.path / step_file(kind)).unlink()
                dropped.append(kind)
        return dropped

    def keep_preflight(self, attempt: int) -> None:
        """Attempt ``attempt`` found what preflight.json says; the next may find otherwise (another host),
        so a replay can serve each attempt its own: preflight.attempt-N.json."""
        if (self.path / PREFLIGHT).exists():
            shutil.copy2(self.path / PREFLIGHT, self.path / f"preflight.attempt-{attempt}.json")

    def write_result(self, status: RunStatus, summary: str, **extra: Any) -> Path:
        if status not in RUN_STATUSES:
            raise ValueError(f"unknown exit status {status!r}")
        return self.write_json(RESULT, {"status": status, "summary": summary,
                                               "finished_at": time.time(), **extra})

    def placed_link(self) -> str | None:
        """Why this run folder may not be written to, when a symbolic link was placed in it (the agent
        makes none): a command that writes here would write through it, onto any file the user can."""
        for folder, dirs, files in os.walk(self.path):
            for name in dirs + files:
                path = os.path.join(folder, name)
                if os.path.islink(path):
                    return (f"{path} is a symbolic link (to {os.readlink(path)}), which dsv4-agent never makes in a "
                            "run folder: nothing was written; remove it (or restore the file) and try again")
        return None

    # -- lock ----------------------------------------------------------------------------------
    def lock(self) -> None:
        try:  # a FIFO or link placed as .lock must not hang or redirect us
            fd = json_data.open_regular(self.path / ".lock", os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW)
        except OSError as err:
            fix = ("remove it (`rm` it: a lock file holds nothing) and try again" if err.errno in (errno.EINVAL, errno.ELOOP)
                   else "the run folder must be writable: copy it somewhere writable (`cp -r`) and use the copy")
            raise RunFolderError(f"cannot lock run {self.path.name}: {self.path / '.lock'}: {err.strerror}; {fix}") from None
        f = open(fd, "a+")  # noqa: SIM115  held open: the lock lasts while the file is open
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            f.close()
            raise RunFolderError(f"run {self.path.name} is being driven by {holder}; "
                                 "wait for it or stop it first") from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}")
        f.flush()
        self._lock_file = f

    def unlock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None


def _placed_special(run: Path) -> str | None:
    """Why the run folder cannot be read: a FIFO, device or socket placed in it (reading one blocks)."""
    for folder, _dirs, files in os.walk(run):
        for name in files:
            path = os.path.join(folder, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue  # gone meanwhile
            if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
                return (f"{path} is not a regular file (a FIFO, device or socket), which dsv4-agent never makes in a "
                        "run folder and cannot read without blocking: remove it (or restore the file) and try again")
    return None
