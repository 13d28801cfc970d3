"""The campaign trace: ``trace.jsonl``, append-only, one JSON event per line, fsync'd per event.

Every event carries ``v`` (schema version), ``seq`` (0-based, gap-free within a run), ``t``
(wall clock, epoch seconds), ``mono`` (monotonic seconds, comparable within one agent process
only: ``pid`` says which), ``lane`` and ``type``. Secrets are redacted before writing.
Writers from several threads (the two lanes) share one lock; a resumed run continues the
sequence after the last good line.
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Literal

SCHEMA_VERSION = 1
Lane = Literal["gpu", "research", "control", "llm"]
EVENT_TYPES = frozenset({
    "run_started", "run_resumed", "run_finished", "node_started", "node_finished",
    "tool_call", "tool_result", "job_launched", "job_state", "job_finished",
    "artifact_written", "llm_request", "llm_response", "progress", "error",
})

_SECRET_KEYS = re.compile(r"(api[_-]?key|token|secret|password|authorization)", re.I)
_SECRET_VALUES = re.compile(r"(sk-[A-Za-z0-9_-]{8,}|hf_[A-Za-z0-9]{8,}|Bearer\s+[A-Za-z0-9._-]{8,})")


def redact(value: Any) -> Any:
    """Replace values of secret-looking keys and secret-looking substrings with a marker."""
    if isinstance(value, dict):
        return {k: ("[redacted]" if _SECRET_KEYS.search(str(k)) and v else redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return _SECRET_VALUES.sub("[redacted]", value)
    return value


class TraceError(Exception):
    """The trace cannot be read as a campaign record (not a torn last line: real corruption)."""


class TraceReadResult:
    def __init__(self, events: list[dict], torn_tail: str | None):
        self.events = events
        self.torn_tail = torn_tail  # text of an incomplete last line, dropped, or None

    @property
    def warning(self) -> str | None:
        if self.torn_tail is None:
            return None
        return (f"trace ends with a torn line ({len(self.torn_tail)} bytes, written when the agent "
                f"died); read {len(self.events)} events before it")


def read_trace(path: Path | str) -> TraceReadResult:
    """Read every event; tolerate one torn (unterminated, unparsable) last line and say so."""
    data = Path(path).read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()  # after the final newline: b"" for a clean file
    events: list[dict] = []
    for number, raw in enumerate(lines, start=1):
        try:
            event = json.loads(raw)
        except json.JSONDecodeError as err:
            raise TraceError(f"{path}: line {number} is not JSON ({err.msg}); the trace is corrupt") from None
        if not isinstance(event, dict) or "seq" not in event or "type" not in event:
            raise TraceError(f"{path}: line {number} is not a trace event (no seq/type)")
        _check_version(path, number, event)
        events.append(event)
    torn = None
    if tail.strip():
        try:
            events.append(json.loads(tail))  # complete JSON, only the newline was lost
        except json.JSONDecodeError:
            torn = tail.decode("utf-8", errors="replace")
    return TraceReadResult(events, torn)


def _check_version(path: Path | str, number: int, event: dict) -> None:
    """Refuse events of a format this build does not read, saying which and what to do."""
    from agent.trace_schema import version_problem  # the schema module imports this one

    problem = version_problem(event.get("v"))
    if problem:
        raise TraceError(f"{path}: line {number}: {problem}")


class TraceWriter:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seq = 0
        if self.path.exists():
            result = read_trace(self.path)
            if result.torn_tail is not None:
                self._drop_torn_tail(len(result.torn_tail.encode()))
            elif self.path.stat().st_size and not self.path.read_bytes().endswith(b"\n"):
                with open(self.path, "ab") as f:
                    f.write(b"\n")
            self._seq = (result.events[-1]["seq"] + 1) if result.events else 0
        self._file = open(self.path, "ab")  # noqa: SIM115  the writer's for its life; close() closes it
        self.listeners: list = []  # callables taking each event after it is on disk (live view)

    def _drop_torn_tail(self, size: int) -> None:
        with open(self.path, "r+b") as f:
            f.truncate(self.path.stat().st_size - size)

    def emit(self, type: str, lane: Lane = "control", **data: Any) -> dict:
        if type not in EVENT_TYPES:
            raise ValueError(f"unknown trace event type {type!r}")
        with self._lock:
            event = {"v": SCHEMA_VERSION, "seq": self._seq, "t": time.time(), "mono": time.monotonic(),
                     "pid": os.getpid(), "lane": lane, "type": type, **redact(data)}
            line = json.dumps(event, default=str, ensure_ascii=False) + "\n"
            self._file.write(line.encode())
            self._file.flush()
            os.fsync(self._file.fileno())
            self._seq += 1
        for listener in self.listeners:
            listener(event)
        return event

    def close(self) -> None:
        with self._lock:
            self._file.close()


def iter_events(path: Path | str, type: str | None = None) -> Iterator[dict]:
    for event in read_trace(path).events:
        if type is None or event["type"] == type:
            yield event


def _last(events: list[dict]) -> str:
    return f"#{events[-1]['seq']} ({events[-1]['type']})" if events else "none (no good event)"


def read_events(path: Path) -> tuple[list[dict], str | None]:
    """Events up to the first line that is not a valid event, and why reading stopped there.

    Unlike ``read_trace`` (which refuses a corrupt trace, since a run must not be resumed on one),
    this keeps every event before the first bad line: replay and the timeline read what is there.
    """
    from agent.trace_schema import EventError, validate_event  # the schema module imports this one

    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()
    events: list[dict] = []
    for number, raw in enumerate([*lines, tail] if tail.strip() else lines, start=1):
        torn = number == len(lines) + 1
        try:
            event = json.loads(raw)
        except json.JSONDecodeError as err:
            what = "is torn (the agent died while writing it)" if torn else f"is not JSON ({err.msg})"
            return events, f"line {number} {what}; the record ends after event {_last(events)}"
        try:
            validate_event(event if isinstance(event, dict) else {"type": None})
        except EventError as err:
            return events, f"line {number} is not a valid event ({err}); the record ends after event {_last(events)}"
        if event["seq"] != len(events):
            return events, (f"line {number} has seq {event['seq']}, expected {len(events)} (lines lost or "
                            f"reordered); the record ends after event {_last(events)}")
        events.append(event)
    return events, None
