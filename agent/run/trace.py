"""The campaign trace: ``trace.jsonl``, append-only, one JSON event per line, fsync'd per event.

Every event has the envelope of docs/trace.md (``mono`` is comparable only within the process that
``pid`` names), is checked against its model and redacted (agent/secrets.py) before it is written.
The two lanes' threads share one lock. A resumed run cuts off a bad tail and continues the sequence
after the last good event (reading: agent/run/trace_read.py).
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from agent.secrets import redact
from agent.run.trace_read import SeqGap, TraceError, TraceReadResult, TraceTail, read_events, read_trace
from agent.run.trace_versions import Lane

__all__ = ["Lane", "TraceWriter", "TraceError", "TraceReadResult", "TraceTail",
           "SeqGap", "read_trace", "read_events", "iter_events", "redact"]



class TraceWriter:
    """Appends events; on an existing trace, first cuts off a bad tail (``dropped``) and notes gaps."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seq = 0
        self._attempt_ended = False  # after run_finished, until the next attempt opens (see emit)
        self.dropped: TraceTail | None = None  # what a crash left after the last good event, cut off here
        self.gaps: list[SeqGap] = []
        if self.path.exists():
            result = read_trace(self.path)  # corruption in the middle: TraceError, nothing changed
            self.dropped, self.gaps = result.tail, result.gaps
            if result.tail is not None:
                with open(self.path, "r+b") as f:
                    f.truncate(result.good_size)
            elif self.path.stat().st_size and not _ends_with_newline(self.path):
                with open(self.path, "ab") as f:
                    f.write(b"\n")  # the last event was whole, only its newline was lost
            self._seq = result.next_seq
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115  the writer's for its life; close() closes it
        self._size = os.fstat(self._file.fileno()).st_size  # the end of the last whole event
        self.listeners: list = []  # callables taking each event after it is on disk (live view)
        self.gates: list = []  # callables taking each event (no envelope yet) before it is written; may raise

    def emit(self, type: str, lane: Lane = "control", **data: Any) -> dict | None:
        """Write one event; it must match its model (agent/run/trace_schema.py), else ``EventError``.

        ``run_finished`` is an attempt's last event: a lane still winding down after it (an interrupt
        records the end while a GPU lane reports its jobs' progress) is not recorded, and None is
        returned. The next attempt (``run_started``/``run_resumed``) opens the trace again."""
        from agent.run.trace_schema import EVENT_MODELS, SCHEMA_VERSION, validate_event  # pydantic: once written

        if type not in EVENT_MODELS:
            raise ValueError(f"unknown trace event type {type!r}")
        for gate in self.gates:  # outside the lock: a gate may hold the calling thread (replay's frontier)
            gate({"lane": lane, "type": type, **data})
        with self._lock:
            if self._attempt_ended and type not in ("run_started", "run_resumed"):
                return None
            event = {"v": SCHEMA_VERSION, "seq": self._seq, "t": time.time(), "mono": time.monotonic(),
                     "pid": os.getpid(), "lane": lane, "type": type, **redact(data)}
            line = json.dumps(event, default=str, ensure_ascii=False) + "\n"
            event = json.loads(line)  # what readers will see (paths as strings, tuples as lists)
            validate_event(event)  # a malformed event is the emitter's bug: it never reaches the file
            self._append(line.encode())
            self._seq += 1
            self._attempt_ended = type == "run_finished"
        for listener in self.listeners:
            listener(event)
        return event

    def _append(self, data: bytes) -> None:
        """Write one whole event, or nothing: a write that fails (a full disk) is cut off again, so the
        trace never holds half an event that the next one would be glued to."""
        fd = self._file.fileno()
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, self._size)  # frees blocks: it works on a full disk
            raise
        self._size += len(data)

    def close(self) -> None:
        with self._lock:
            self._file.close()


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def iter_events(path: Path | str, type: str | None = None) -> Iterator[dict]:
    for event in read_trace(path).events:
        if type is None or event["type"] == type:
            yield event
