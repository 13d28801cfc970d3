"""Reading ``trace.jsonl`` as bytes, whatever a crash or a disk left in it.

Lines are read and decoded one by one (a kill can cut one anywhere, even inside a UTF-8 character),
so no bytes make a reader crash and no reader holds more of the file than one line: a line over
``MAX_LINE_BYTES`` is refused, naming the file. Found: the good events; the *tail* of bad lines after
the last good one (``resume`` cuts it off and says so); ``seq`` *gaps* (events lost or written
twice); and a bad line followed by good events, corruption that ``read_trace`` (resume) refuses and
``read_events`` (replay, timeline) stops at, reading no further. ``status`` counts with
``count_events``: the same walk keeping no event, only the envelope checked, pydantic never imported.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from collections.abc import Iterator
from itertools import count
from pathlib import Path

from tools import json_data


VERSION = "of another format: "
MAX_LINE_BYTES = 16 << 20  # events are far smaller (LLM exchanges are files of their own): a longer line is no event
TORN = "torn (the agent died while writing it)"


class TraceError(Exception):
    """The trace cannot be read as a campaign record (not a bad tail: real corruption)."""


@dataclass
class TraceTail:
    """Bytes after the last good event that are not events."""

    size: int                       # bytes, from the end of the last good line to the end of the file
    lines: int
    why: str                        # e.g. "a torn line (the agent died while writing it)"

    def describe(self) -> str:
        if self.lines == 1 and "torn" in self.why:
            return f"a torn line ({self.size} bytes; {self.why})"
        return f"{self.size} bytes that are not events ({self.why})"


@dataclass
class SeqGap:
    after: int                      # seq of the event before the jump
    found: int                      # seq that came next instead of after + 1

    def describe(self) -> str:
        if self.found <= self.after:
            return f"seq {self.found} comes again after seq {self.after} (an event written twice)"
        missing = self.found - self.after - 1
        return f"after seq {self.after} comes seq {self.found} ({missing} event{'s' * (missing != 1)} missing)"


@dataclass
class TraceReadResult:
    events: list[dict]
    tail: TraceTail | None = None
    gaps: list[SeqGap] = field(default_factory=list)
    good_size: int = 0              # bytes up to and including the last good line

    @property
    def problems(self) -> list[str]:
        return _problems(self.tail, self.gaps, len(self.events))

    @property
    def warning(self) -> str | None:
        return "; ".join(self.problems) or None

    @property
    def next_seq(self) -> int:
        return max((e["seq"] for e in self.events), default=-1) + 1


def _problems(tail: TraceTail | None, gaps: list[SeqGap], events: int) -> list[str]:
    found = [f"trace ends with {tail.describe()}; read {events} events before it"] if tail else []
    return found + [f"trace sequence gap: {g.describe()}" for g in gaps]


@dataclass
class _Line:
    number: int
    end: int                        # byte offset just after this line (its newline included)
    event: dict | None
    problem: str | None


def _envelope_problem(event: object) -> str | None:
    """Without the schema: what makes this JSON value no event (None: an event, as far as seen)."""
    if not isinstance(event, dict):
        return f"not a trace event (a JSON {type(event).__name__}, not an object)"
    missing = [k for k in ("v", "seq", "type") if k not in event]
    if missing:
        return f"not a trace event (no {', '.join(missing)})"
    if not isinstance(event["seq"], int) or isinstance(event["seq"], bool) or event["seq"] < 0:
        return f"not a trace event (seq {event['seq']!r} is not a count)"
    return None


def _parse(raw: bytes, terminated: bool, schema: bool = True) -> tuple[dict | None, str | None]:
    if schema:
        from agent.run.trace_schema import EventError, validate_event, version_problem  # pydantic: only once a trace is read
    else:
        from agent.run.trace_versions import version_problem

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return None, TORN if not terminated else f"not UTF-8 text (byte {err.start})"
    try:
        event = json_data.loads(text)
    except json.JSONDecodeError as err:
        return None, TORN if not terminated else f"not JSON ({err.msg})"
    if isinstance(event, dict) and version_problem(event.get("v")) and "seq" in event and "type" in event:
        return None, VERSION + version_problem(event.get("v"))  # an event, but of a format we do not read
    if not schema:
        problem = _envelope_problem(event)  # a wrong version with seq and type is said above
        return (None, problem) if problem else (event, None)
    try:
        validate_event(event if isinstance(event, dict) else {"type": None})
    except EventError as err:
        return None, f"not a trace event ({err})"
    return event, None


def trace_lines(path: Path | str, schema: bool = True) -> Iterator[_Line]:
    """The trace's non-blank lines, parsed, read from the file one at a time as they are asked for."""
    size = 0
    with open(json_data.open_regular(path), "rb") as f:
        for number in count(1):
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            terminated = raw.endswith(b"\n")
            if not terminated and len(raw) > MAX_LINE_BYTES:
                raise TraceError(f"{path}: line {number} is over {MAX_LINE_BYTES >> 20} MiB, longer than any event "
                                 "this agent writes: not a trace it can read; move it aside")
            size += len(raw)
            if raw.strip():
                event, problem = _parse(raw[:-1] if terminated else raw, terminated, schema)
                yield _Line(number, size, event, problem)


@dataclass
class _Walk:
    """One pass over a trace: what ``read_trace`` and ``count_events`` say, events kept only when asked."""

    events: list[dict] = field(default_factory=list)
    count: int = 0
    last_seq: int | None = None
    gaps: list[SeqGap] = field(default_factory=list)
    good_size: int = 0
    bad: list[_Line] = field(default_factory=list)  # the bad lines since the last good event
    newer: _Line | None = None
    middle: _Line | None = None

    def take(self, line: _Line, keep: bool) -> None:
        if line.event is None:
            self.newer = self.newer or (line if line.problem.startswith(VERSION) else None)
            self.bad.append(line)
            return
        self.middle = self.middle or (self.bad[0] if self.bad else None)
        seq = line.event["seq"]
        if (self.last_seq is None and seq != 0) or (self.last_seq is not None and seq != self.last_seq + 1):
            self.gaps.append(SeqGap(-1 if self.last_seq is None else self.last_seq, seq))
        if keep:
            self.events.append(line.event)
        self.count, self.last_seq, self.good_size, self.bad = self.count + 1, seq, line.end, []


def _walk(path: Path | str, schema: bool, keep: bool) -> tuple[_Walk, TraceTail | None]:
    """The whole trace walked line by line; refused (TraceError) where it is no record to continue."""
    walk = _Walk()
    for line in trace_lines(path, schema):
        walk.take(line, keep)
    tail = TraceTail(size=Path(path).stat().st_size - walk.good_size, lines=len(walk.bad),
                     why=f"line {walk.bad[0].number}: {walk.bad[0].problem}") if walk.bad else None
    if walk.newer is not None:  # never cut off, never resumed on: a record of a format this build does not read
        raise TraceError(f"{path}: line {walk.newer.number}: {walk.newer.problem[len(VERSION):]}")
    if not walk.count and tail is not None and not (tail.lines == 1 and "torn" in tail.why):
        raise TraceError(f"{path} holds no trace event ({tail.why}): it is not a record this agent can "
                         "continue; move it aside to start the run over")
    if walk.middle is not None:
        raise TraceError(f"{path}: line {walk.middle.number} is {walk.middle.problem}, and good events follow it: "
                         "the trace is corrupt in the middle; replay reads it up to there (dsv4-agent replay RUN)")
    return walk, tail


def read_trace(path: Path | str, schema: bool = True) -> TraceReadResult:
    """Every event, refusing corruption in the middle; a bad tail and sequence gaps are reported.
    ``schema=False``: each event's envelope is checked, not its type's fields (see above)."""
    walk, tail = _walk(path, schema, keep=True)
    return TraceReadResult(walk.events, tail, walk.gaps, walk.good_size)


def _last(events: list[dict]) -> str:
    return f"#{events[-1]['seq']} ({events[-1]['type']})" if events else "none (no good event)"


def read_events(path: Path) -> tuple[list[dict], str | None]:
    """Events up to the first bad line or sequence gap, and why reading stopped there (None: whole).

    Unlike ``read_trace`` (which refuses a corrupt trace, since a run must not be resumed on one),
    this keeps every event before the first problem, and reads the file no further: replay and the
    timeline read what is there.
    """
    events: list[dict] = []
    for line in trace_lines(path):
        if line.event is None:
            problem = line.problem.removeprefix(VERSION)
            return events, f"line {line.number} is {problem}; the record ends after event {_last(events)}"
        if line.event["seq"] != len(events):
            return events, (f"line {line.number} has seq {line.event['seq']}, expected {len(events)} (events "
                            f"lost or written twice); the record ends after event {_last(events)}")
        events.append(line.event)
    return events, None


@dataclass
class TraceCount:
    """What ``status`` says of a trace: its events counted and what is wrong, read line by line (a trace
    of any size costs the memory of its longest line, not of its events)."""

    events: int = 0
    warning: str | None = None


def count_events(path: Path | str) -> TraceCount:
    """``read_trace(path, schema=False)``'s count and warning, or its TraceError, without keeping events."""
    walk, tail = _walk(path, schema=False, keep=False)
    return TraceCount(walk.count, "; ".join(_problems(tail, walk.gaps, walk.count)) or None)
