"""The terminal view of a campaign: an overall clock with the campaign's ETA, the lanes, and its jobs.

On a terminal, a rich ``Live`` view with the campaign's lines printed above it: elapsed time and the
ETA of the GPU work left (agent/terminal/live_eta.py), each lane's doing, and a row per job (a variant's bench
points share one) with GPUs, status, progress and ETA; it stays on screen when the campaign ends.
Elsewhere (CI, pipes) plain lines: launches, finishes, errors, progress by quarters. A closed pipe or
terminal (SIGHUP, then EIO) silences the output and the campaign goes on. Colour honours ``NO_COLOR``.
"""
from __future__ import annotations

import os
import sys
import threading
import time

from typing import TYPE_CHECKING

from agent.terminal.live_eta import CampaignEta
from agent.secrets import redact_text
from agent.terminal.printable import gpu_list, printable, text

if TYPE_CHECKING:
    from rich.console import Console, Group
    from rich.live import Live

_NOTABLE = {"job_launched", "job_finished", "error", "search_budget", "search_drop", "search_repeat"}
# What rich reads to treat a stream that is no terminal as one (rich.console.Console.is_terminal).
_TERMINAL_ENV = ("TTY_COMPATIBLE", "FORCE_COLOR")
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
    """Seconds left at the job's rate so far (None until it has finished a unit; units a run
    before this one finished, ``before``, do not count towards the rate)."""
    done, total = job.get("done"), job.get("total")
    here = (done or 0) - job.get("before", 0)
    if here <= 0 or not total or "ended" in job or done >= total:
        return None
    return (now - job["since"]) * (total - done) / here


def bench_row(variant: str) -> str:
    return f"bench {variant}"


def _console(stream, to_stderr: bool) -> "Console | None":
    """rich's console for a terminal; None (plain lines, rich not imported) where rich would not draw
    either: a pipe, a file or /dev/null, as under CI and in scripts."""
    try:
        maybe_terminal = stream.isatty() or any(name in os.environ for name in _TERMINAL_ENV)
    except (AttributeError, ValueError):  # a replaced or closed stream
        maybe_terminal = False
    if not maybe_terminal:
        return None
    from rich.console import Console

    return Console(highlight=False, stderr=to_stderr)


class LiveView:
    def __init__(self, console: Console | None = None, force_plain: bool = False, to_stderr: bool = False):
        self.stream = sys.stderr if to_stderr else sys.stdout  # stderr when stdout carries --json
        self.console = console if console is not None or force_plain else _console(self.stream, to_stderr)
        self.plain = force_plain or self.console is None or not self.console.is_terminal
        self.run_path = None  # the run folder, once the campaign has one
        self.started = time.time()
        self.lanes: dict[str, str] = {}
        self.jobs: dict[str, dict] = {}  # rows by job key; a variant's bench points share bench_row(variant)
        self.campaign = CampaignEta()
        self._points: dict[str, dict] = {}  # bench rows counted by the sweep, shown from their first point
        self._lock = threading.Lock()
        self._live: "Live | None" = None

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
                if event.get("kind") == "bench" and event.get("variant"):
                    self._bench(event, kind, now)
                elif event.get("key") or event.get("job"):  # a job's first word may be a progress line
                    job = self.jobs.setdefault(job_key(event), {"since": now, "status": "running"})
                    crossed = self._progress(job, event)
            elif kind in ("job_launched", "job_state", "job_finished") and event.get("kind") == "bench" \
                    and event.get("variant"):
                crossed = self._bench(event, kind, now)
            elif kind in ("job_launched", "job_state", "job_finished"):
                self._job(event, kind, now)
            self.campaign.on_event(kind, event, now)
        if self.plain and kind in _NOTABLE:
            detail = event.get("status") or event.get("message") or ""
            gpus = job_gpus(event)
            where = f" on GPU {gpu_list(gpus)}" if gpus else ""
            self.say(f"[{lane}] {kind.replace('_', ' ')}: {job_key(event)}{where} {detail}".rstrip())
        if self.plain and crossed is not None:
            row = bench_row(event["variant"]) if event.get("kind") == "bench" else job_key(event)
            job = self.jobs[row]
            left = eta(job, now)
            share = job["done"] / job["total"]  # the share done, not the quarter it crossed (8/18 is 44%)
            self.say(f"[{lane}] progress: {row} {job['done']}/{job['total']} ({share:.0%}"
                     f"{f', ETA {clock(left)}' if left is not None else ''})")

    def _job(self, event: dict, kind: str, now: float) -> None:
        job = self.jobs.setdefault(job_key(event), {"since": now})
        if kind == "job_launched" and "ended" in job:  # launched again (a retry): a fresh clock
            job.clear()
            job["since"] = now
        job["status"] = event.get("status") or ("running" if kind == "job_launched" else job.get("status", ""))
        job["gpus"] = job_gpus(event) if job_gpus(event) is not None else job.get("gpus")
        job["kind"] = event.get("kind") or job.get("kind")
        if kind == "job_finished":
            job["ended"] = now

    def _bench(self, event: dict, kind: str, now: float) -> float | None:
        """A variant's benchmark points on one row: the plan's count, those done, the one running.
        Returns the quarter of the points a finished point just crossed, if any."""
        name = bench_row(event["variant"])
        if kind == "progress" and "points" in event:  # the sweep's count: the plan's points, those done before
            points, measured = int(event["points"]), int(event.get("measured") or 0)
            self._points[name] = {"since": now, "status": "starting", "gpus": [], "total": points,
                                  "done": measured, "before": measured}
            if points and measured >= points:  # no server comes for it: its row now
                self.jobs[name] = {**self._points.pop(name), "ended": now, "status": "measured before"}
            return None
        # the row comes after its server's (made first, when it launched) at the variant's first point
        row = self.jobs.get(name) or self.jobs.setdefault(name, self._points.pop(name, None) or {
            "since": now, "status": "starting", "gpus": [], "done": 0, "total": 0})
        if kind == "progress":
            row["message"] = str(event.get("message", ""))[:60]
        elif kind == "job_launched":
            if not row.get("started"):  # the clock of the row runs from its first point
                row.update(since=now, started=True)
            repeat = event.get("repeat") or 1
            row["status"] = f"running c{event.get('concurrency')}" + (f" r{repeat}" if repeat > 1 else "")
        elif kind == "job_finished":
            before = row["done"] / row["total"] if row["total"] else 0
            row["done"] += 1
            row["failed"] = row.get("failed", 0) + (event.get("status") != "succeeded")
            if row["total"] and row["done"] >= row["total"]:
                row["ended"] = now
                row["status"] = f"{row['failed']} failed" if row["failed"] else "done"
            if row["total"]:
                return next((q for q in reversed(_QUARTERS) if before < q <= row["done"] / row["total"]), None)
        return None

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
    def _render(self) -> "Group":
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        now = time.time()
        with self._lock:
            lanes = Table(title=f"campaign {clock(now - self.started)}{self._campaign_eta(now)}", expand=True)
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
                jobs.add_row(text(key), gpu_list(gpus), text(job.get("status", "")), bar,
                             f"{done}/{total}" if total else "", clock(job.get("ended", now) - job["since"]),
                             clock(left) if left is not None else "")
        return Group(lanes, jobs)

    def _campaign_eta(self, now: float) -> str:
        """`` · ETA mm:ss`` of the GPU work left; ``+`` and what is not timed yet when a part has no rate."""
        self.campaign.read_plan(self.run_path)
        tuning = [eta(job, now) for job in self.jobs.values() if job.get("kind") == "tune" and "ended" not in job]
        left, untimed = self.campaign.left(tuning, now)
        if not untimed:
            return f" · ETA {clock(left)}" if left > 0 else ""
        return f" · ETA {clock(left)}+ (not timed yet: {', '.join(untimed)})"

    def finish(self) -> None:
        """Draw the view one last time and leave it on screen: what is printed next comes below it."""
        if self._live is not None:
            try:
                self._live.__exit__(None, None, None)
            except OSError:
                self._silence()
            finally:
                self._live = None

    def __enter__(self) -> "LiveView":
        if not self.plain:
            from rich.live import Live

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
