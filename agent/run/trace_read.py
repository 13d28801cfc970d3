"""Reading ``trace.jsonl`` as bytes, whatever a crash or a disk left in it.

Lines are decoded one by one (a kill can cut one anywhere, even inside a UTF-8 character), so no
bytes make a reader crash. Found: the good events; the *tail* of bad lines after the last good one
(``resume`` cuts it off and says so); ``seq`` *gaps* (events lost or written twice); and a bad line
followed by good events, corruption that ``read_trace`` (resume) refuses and ``read_events``
(replay, timeline) stops at. ``status`` counts with ``count_events``: line by line (a trace of any
size, none of its events kept), only the envelope checked, pydantic never imported.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from tools import json_data


VERSION = "of another format: "
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


def _lines(data: bytes, schema: bool = True) -> list[_Line]:
    out: list[_Line] = []
    start = 0
    number = 0
    while start < len(data):
        stop = data.find(b"\n", start)
        terminated = stop != -1
        end = stop + 1 if terminated else len(data)
        raw = data[start:stop if terminated else len(data)]
        number += 1
        if raw.strip():
            event, problem = _parse(raw, terminated, schema)
            out.append(_Line(number, end, event, problem))
        start = end
    return out


def scan(path: Path | str, schema: bool = True) -> tuple[TraceReadResult, list[_Line]]:
    """The trace read leniently (every good event, the bad tail, the gaps) and all its parsed lines."""
    data = Path(path).read_bytes()
    lines = _lines(data, schema)
    last_good = max((i for i, line in enumerate(lines) if line.event is not None), default=-1)
    events = [line.event for line in lines[:last_good + 1] if line.event is not None]
    good_size = lines[last_good].end if last_good >= 0 else 0
    bad_tail = lines[last_good + 1:]
    tail = TraceTail(size=len(data) - good_size, lines=len(bad_tail),
                     why=f"line {bad_tail[0].number}: {bad_tail[0].problem}") if bad_tail else None
    gaps = [SeqGap(a["seq"], b["seq"]) for a, b in pairwise(events) if b["seq"] != a["seq"] + 1]
    if events and events[0]["seq"] != 0:
        gaps.insert(0, SeqGap(-1, events[0]["seq"]))
    return TraceReadResult(events, tail, gaps, good_size), lines


def read_trace(path: Path | str, schema: bool = True) -> TraceReadResult:
    """Every event, refusing corruption in the middle; a bad tail and sequence gaps are reported.
    ``schema=False``: each event's envelope is checked, not its type's fields (see above)."""
    result, lines = scan(path, schema)
    newer = next((line for line in lines if (line.problem or "").startswith(VERSION)), None)
    if newer is not None:  # never cut off, never resumed on: a record of a format this build does not read
        raise TraceError(f"{path}: line {newer.number}: {newer.problem[len(VERSION):]}")
    tail_from = lines[-result.tail.lines].number if result.tail else None
    middle = next((line for line in lines if line.event is None and (tail_from is None or line.number < tail_from)),
                  None)
    if not result.events and result.tail is not None and not (result.tail.lines == 1 and "torn" in result.tail.why):
        raise TraceError(f"{path} holds no trace event ({result.tail.why}): it is not a record this agent can "
                         "continue; move it aside to start the run over")
    if middle is not None:
        raise TraceError(f"{path}: line {middle.number} is {middle.problem}, and good events follow it: the "
                         "trace is corrupt in the middle; replay reads it up to there (dsv4-agent replay RUN)")
    return result


def _last(events: list[dict]) -> str:
    return f"#{events[-1]['seq']} ({events[-1]['type']})" if events else "none (no good event)"


def read_events(path: Path) -> tuple[list[dict], str | None]:
    """Events up to the first bad line or sequence gap, and why reading stopped there (None: whole).

    Unlike ``read_trace`` (which refuses a corrupt trace, since a run must not be resumed on one),
    this keeps every event before the first problem: replay and the timeline read what is there.
    """
    _result, lines = scan(path)
    events: list[dict] = []
    for line in lines:
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
    count, last_seq, gaps, size, good_size = 0, None, [], 0, 0
    bad: list[_Line] = []  # the bad lines since the last good event
    newer = middle = None
    with open(json_data.open_regular(path), "rb") as f:
        for number, raw in enumerate(f, start=1):
            size += len(raw)
            if not raw.strip():
                continue
            terminated = raw.endswith(b"\n")
            event, problem = _parse(raw[:-1] if terminated else raw, terminated, schema=False)
            if event is None:
                newer = newer or (_Line(number, size, None, problem) if problem.startswith(VERSION) else None)
                bad.append(_Line(number, size, None, problem))
                continue
            middle = middle or (bad[0] if bad else None)
            if last_seq is None and event["seq"] != 0:
                gaps.append(SeqGap(-1, event["seq"]))
            elif last_seq is not None and event["seq"] != last_seq + 1:
                gaps.append(SeqGap(last_seq, event["seq"]))
            count, last_seq, good_size, bad = count + 1, event["seq"], size, []
    tail = TraceTail(size=size - good_size, lines=len(bad), why=f"line {bad[0].number}: {bad[0].problem}") \
        if bad else None
    if newer is not None:
        raise TraceError(f"{path}: line {newer.number}: {newer.problem[len(VERSION):]}")
    if not count and tail is not None and not (tail.lines == 1 and "torn" in tail.why):
        raise TraceError(f"{path} holds no trace event ({tail.why}): it is not a record this agent can "
                         "continue; move it aside to start the run over")
    if middle is not None:
        raise TraceError(f"{path}: line {middle.number} is {middle.problem}, and good events follow it: the "
                         "trace is corrupt in the middle; replay reads it up to there (dsv4-agent replay RUN)")
    return TraceCount(count, "; ".join(_problems(tail, gaps, count)) or None)
