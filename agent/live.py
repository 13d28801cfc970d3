"""The terminal view of a campaign: an overall clock, the lanes, and every job while it runs.

On a terminal it is a rich ``Live`` view redrawn four times a second, the campaign's lines printed
above it: the time since the campaign started, what each lane is doing, and one row per job
(tuning jobs, servers, benchmark points) with its GPUs, status, a progress bar where the job
reports units (tuning units per GPU, benchmark points per variant), its elapsed time and an ETA
from its rate so far. Elsewhere (CI, pipes) it prints plain lines: a job launched or finished,
an error, and progress at each quarter of a job's units. A closed pipe (``| head``) or a closed
terminal (SIGHUP, then EIO on every write) silences the output and the campaign goes on.
"""
from __future__ import annotations

import os
import sys
import threading
import time

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table

from agent.secrets import redact_text
from agent.terminal import printable, text

_NOTABLE = {"job_launched", "job_finished", "error"}
_QUARTERS = (0.25, 0.5, 0.75, 1.0)


def job_key(event: dict) -> str:
    return str(event.get("key") or event.get("job") or "?")


def job_gpus(event: dict) -> list[int] | None:
    """Job events name their GPUs as ``gpus`` (a list); tuning fan-out events as ``gpu``."""
    if event.get("gpus") is not None:
        return list(event["gpus"])
    return [event["gpu"]] if event.get("gpu") is not None else None


def clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60:02d}:{seconds % 60:02d}"


def eta(job: dict, now: float) -> float | None:
    """Seconds left at the job's rate so far (None until it has finished a unit)."""
    done, total = job.get("done"), job.get("total")
    if not done or not total or "ended" in job or done >= total:
        return None
    return (now - job["since"]) * (total - done) / done


class LiveView:
    def __init__(self, console: Console | None = None, force_plain: bool = False, to_stderr: bool = False):
        self.stream = sys.stderr if to_stderr else sys.stdout  # stderr when stdout carries --json
        self.console = console or Console(highlight=False, stderr=to_stderr)
        self.plain = force_plain or not self.console.is_terminal
        self.run_path = None  # the run folder, once the campaign has one
        self.started = time.time()
        self.lanes: dict[str, str] = {}
        self.jobs: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._live: Live | None = None

    # -- inputs ----------------------------------------------------------------------------
    def say(self, line: str) -> None:
        line = printable(redact_text(line))  # lines quote repos, logs, the LLM and settings: no controls, no secrets
        try:
            if self._live is not None:
                self._live.console.print(line, markup=False, highlight=False)
            else:
                print(line, file=self.stream, flush=True)
        except OSError:  # `| head` left (EPIPE), or the terminal was closed (EIO): the campaign goes on
            self._silence()

    def _silence(self) -> None:
        """Send this stream's further output (and the final flush) nowhere."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.stream.fileno())
        os.close(devnull)

    def on_event(self, event: dict) -> None:
        kind, lane = event.get("type"), event.get("lane", "control")
        now = event.get("t", time.time())
        crossed = None
        with self._lock:
            if kind == "run_started" or kind == "run_resumed":
                self.started = now
            elif kind == "node_started":
                self.lanes[lane] = f"{event.get('node')} running"
            elif kind == "node_finished":
                self.lanes[lane] = f"{event.get('node')} done"
            elif kind == "tool_call":
                self.lanes[lane] = f"{event.get('tool')} …"
            elif kind == "progress":
                self.lanes[lane] = str(event.get("message", ""))[:80]
                if event.get("key") or event.get("job"):  # a job's first word may be a progress line
                    job = self.jobs.setdefault(job_key(event), {"since": now, "status": "running"})
                    crossed = self._progress(job, event)
            elif kind in ("job_launched", "job_state", "job_finished"):
                self._job(event, kind, now)
        if self.plain and kind in _NOTABLE:
            detail = event.get("status") or event.get("message") or ""
            gpus = job_gpus(event)
            where = f" on GPU {','.join(map(str, gpus))}" if gpus else ""
            self.say(f"[{lane}] {kind.replace('_', ' ')}: {job_key(event)}{where} {detail}".rstrip())
        elif self.plain and crossed is not None:
            job = self.jobs[job_key(event)]
            left = eta(job, now)
            self.say(f"[{lane}] progress: {job_key(event)} {job['done']}/{job['total']} ({crossed:.0%}"
                     f"{f', ETA {clock(left)}' if left is not None else ''})")

    def _job(self, event: dict, kind: str, now: float) -> None:
        job = self.jobs.setdefault(job_key(event), {"since": now})
        if kind == "job_launched" and "ended" in job:  # launched again (a retry): a fresh clock
            job.clear()
            job["since"] = now
        job["status"] = event.get("status") or ("running" if kind == "job_launched" else job.get("status", ""))
        job["gpus"] = job_gpus(event) or job.get("gpus")
        if kind == "job_finished":
            job["ended"] = now

    @staticmethod
    def _progress(job: dict, event: dict) -> float | None:
        """Record a job's units; the quarter it just crossed (for the plain lines), if any."""
        job["message"] = str(event.get("message", ""))[:60]
        done, total = event.get("done"), event.get("total")
        if not isinstance(done, int) or not isinstance(total, int) or total <= 0:
            return None
        before = (job.get("done") or 0) / total
        job.update(done=done, total=total)
        return next((q for q in reversed(_QUARTERS) if before < q <= done / total), None)

    # -- rendering -------------------------------------------------------------------------
    def _render(self) -> Group:
        now = time.time()
        with self._lock:
            lanes = Table(title=f"campaign {clock(now - self.started)}", expand=True)
            lanes.add_column("lane", width=10)
            lanes.add_column("now")
            for lane in ("control", "gpu", "research", "llm"):
                if lane in self.lanes:
                    lanes.add_row(lane, text(self.lanes[lane]))
            if not self.jobs:
                return Group(lanes)
            jobs = Table(title="jobs", expand=True)
            for col in ("job", "gpus", "status", "progress", "", "elapsed", "ETA"):
                jobs.add_column(col)
            for key, job in self.jobs.items():
                gpus = job.get("gpus")
                done, total = job.get("done"), job.get("total")
                bar = ProgressBar(total=total, completed=done or 0, width=20) if total else job.get("message", "")
                left = eta(job, now)
                bar = text(bar) if isinstance(bar, str) else bar  # a message from a log: printable, not markup
                jobs.add_row(text(key), ",".join(map(str, gpus)) if gpus else "-", text(job.get("status", "")), bar,
                             f"{done}/{total}" if total else "", clock(job.get("ended", now) - job["since"]),
                             clock(left) if left is not None else "")
        return Group(lanes, jobs)

    def __enter__(self) -> "LiveView":
        if not self.plain:
            self._live = Live(get_renderable=self._render, console=self.console, refresh_per_second=4,
                              transient=False, redirect_stdout=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self._live is not None:
                self._live.__exit__(*exc)
            self.stream.flush()
        except OSError:
            self._silence()
        finally:
            self._live = None
