"""The terminal view of a campaign: lanes and jobs, live, fed by trace events.

On a terminal it is a rich ``Live`` table redrawn four times a second, with the campaign's
lines printed above it; elsewhere (CI, pipes) it prints one plain line per notable event.
"""
from __future__ import annotations

import os
import sys
import threading
import time

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

_NOTABLE = {"job_launched", "job_finished", "error"}


def job_key(event: dict) -> str:
    return str(event.get("key") or event.get("job") or "?")


def job_gpus(event: dict) -> list[int] | None:
    """Job events name their GPUs as ``gpus`` (a list); tuning fan-out events as ``gpu``."""
    if event.get("gpus") is not None:
        return list(event["gpus"])
    return [event["gpu"]] if event.get("gpu") is not None else None


class LiveView:
    def __init__(self, console: Console | None = None, force_plain: bool = False, to_stderr: bool = False):
        self.stream = sys.stderr if to_stderr else sys.stdout  # stderr when stdout carries --json
        self.console = console or Console(highlight=False, stderr=to_stderr)
        self.plain = force_plain or not self.console.is_terminal
        self.run_path = None  # the run folder, once the campaign has one
        self.lanes: dict[str, str] = {}
        self.jobs: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._live: Live | None = None

    # -- inputs ----------------------------------------------------------------------------
    def say(self, line: str) -> None:
        if self._live is not None:
            self._live.console.print(line, markup=False)
        else:
            try:
                print(line, file=self.stream, flush=True)
            except BrokenPipeError:  # `dsv4-agent ... | head`: the reader left; the campaign goes on
                self._silence()

    def _silence(self) -> None:
        """Send this stream's further output (and the final flush) nowhere."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.stream.fileno())
        os.close(devnull)

    def on_event(self, event: dict) -> None:
        kind, lane = event.get("type"), event.get("lane", "control")
        with self._lock:
            if kind == "node_started":
                self.lanes[lane] = f"{event.get('node')} running"
            elif kind == "node_finished":
                self.lanes[lane] = f"{event.get('node')} done"
            elif kind == "tool_call":
                self.lanes[lane] = f"{event.get('tool')} …"
            elif kind == "progress":
                self.lanes[lane] = str(event.get("message", ""))[:80]
                if event.get("key") or event.get("job"):
                    self.jobs.setdefault(job_key(event), {})["progress"] = str(event.get("message", ""))[:60]
            elif kind in ("job_launched", "job_state", "job_finished"):
                job = self.jobs.setdefault(job_key(event), {})
                job.update(status=event.get("status", "running" if kind == "job_launched" else job.get("status")),
                           gpus=job_gpus(event) or job.get("gpus"), since=job.get("since", event.get("t", time.time())))
                if kind == "job_finished":
                    job["ended"] = event.get("t", time.time())
        if self.plain and kind in _NOTABLE:
            detail = event.get("status") or event.get("message") or ""
            gpus = job_gpus(event)
            where = f" on GPU {','.join(map(str, gpus))}" if gpus else ""
            self.say(f"[{lane}] {kind.replace('_', ' ')}: {job_key(event)}{where} {detail}".rstrip())

    # -- rendering -------------------------------------------------------------------------
    def _render(self) -> Group:
        lanes = Table(title="lanes", expand=True)
        lanes.add_column("lane", width=10)
        lanes.add_column("now")
        with self._lock:
            for lane in ("control", "gpu", "research", "llm"):
                if lane in self.lanes:
                    lanes.add_row(lane, self.lanes[lane])
            jobs = Table(title="jobs", expand=True)
            for col in ("job", "gpus", "status", "progress", "elapsed"):
                jobs.add_column(col)
            for key, job in self.jobs.items():
                gpus = job.get("gpus")
                jobs.add_row(key, ",".join(map(str, gpus)) if gpus else "-", str(job.get("status", "")),
                             job.get("progress", ""), f"{job.get('ended', time.time()) - job.get('since', time.time()):.0f}s")
        return Group(lanes, jobs) if self.jobs else Group(lanes)

    def __enter__(self) -> "LiveView":
        if not self.plain:
            self._live = Live(get_renderable=self._render, console=self.console, refresh_per_second=4,
                              transient=False, redirect_stdout=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None
        sys.stdout.flush()
