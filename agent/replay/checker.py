"""Compares the decisions a replay makes, as it makes them, with the recorded ones.

The two lanes run on two threads, so their events interleave differently on every run; order is
compared within each lane (control, gpu, research, llm), which is what the graph fixes, attempt
by attempt. The first difference stops the replay (``ReplayDivergence``); running out of record in
a truncated trace stops it too (``ReplayStop``), after everything up to the last good event has
been checked. An attempt the recorded agent did not finish (killed or interrupted) is held at its
frontier (agent/replay/frontier.py). Paths of the two run folders are compared as ``<RUN>``.
All three exceptions are ``BaseException`` so that no step's error handling can swallow them.
"""
from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any, NoReturn

from agent.replay.frontier import Frontier, ReplayCut
from agent.replay.record import ORCHESTRATION_LANES, Recording, normalized, split_attempts


@dataclass
class Divergence:
    expected: dict | None       # the recorded event (None: the replay made one more than the record has)
    got: dict | None            # the replayed event (None: the replay ended without making it)
    lane: str
    note: str = ""
    against: str = ""           # set when a served event disagrees with a file the run kept, not with the replay

    def describe(self) -> str:
        if self.expected is None:
            return (f"replay made an event the recording does not have in lane {self.lane}: "
                    f"{_brief(self.got)}{self.note}")
        where = f"recorded event #{self.expected['seq']} (line {self.expected['seq'] + 1}, lane {self.lane}, " \
                f"{self.expected['type']})"
        if self.got is None:
            return f"{where} was not reproduced: the replay ended without it{self.note}"
        what = self.against or f"replayed event #{self.got.get('seq', '?')}"
        lines = [f"{where} differs from {what}:"]
        want, have = normalized(self.expected), normalized(self.got)
        for key in sorted(set(want) | set(have)):
            a, b = want.get(key), have.get(key)
            if a == b:
                continue
            lines.append(f"  {key}: expected {_short(a)}, got {_short(b)}")
            if isinstance(a, list) and isinstance(b, list):  # long lists are cut above: name the difference
                only_a, only_b = [x for x in a if x not in b], [x for x in b if x not in a]
                lines.append(f"    only in the record: {_short(only_a)}; only in the replay: {_short(only_b)}")
        return "\n".join(lines) + self.note


def _short(value, limit: int = 300) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars cut]"


def _brief(event: dict | None) -> str:
    return _short(normalized(event)) if event else "nothing"


class ReplayDivergence(BaseException):
    def __init__(self, divergence: Divergence):
        super().__init__(divergence.describe())
        self.divergence = divergence


class ReplayStop(BaseException):
    """The record ends here (truncated or corrupt trace); everything before it was reproduced."""


def _queue_of(event: dict) -> str:
    """Events are compared in order per lane; the run's finish has its own queue, since it is written by the
    main thread while a lane's thread may still write (an interrupt ends the run wherever the lanes are)."""
    return "finish" if event["type"] == "run_finished" else event["lane"]


def with_placeholders(value: Any, paths: list[str]) -> Any:
    """``value`` with every occurrence of the given run-folder paths replaced by ``<RUN>``."""
    if isinstance(value, str):
        for path in paths:
            value = value.replace(path, "<RUN>")
        return value
    if isinstance(value, dict):
        return {k: with_placeholders(v, paths) for k, v in value.items()}
    if isinstance(value, list):
        return [with_placeholders(v, paths) for v in value]
    return value


class DecisionChecker:
    def __init__(self, recording: Recording, frontier: Frontier | None = None, replay_paths: list[str] = ()):
        self.attempts = split_attempts(recording.events)
        self.expected: list[dict[str, deque[dict]]] = []
        for attempt in self.attempts:
            queues: dict[str, deque[dict]] = {}
            for event in attempt.decisions:
                queues.setdefault(_queue_of(event), deque()).append(event)
            self.expected.append(queues)
        self.total = sum(len(a.decisions) for a in self.attempts)
        self.current = 0
        self.matched = 0
        self.truncated = recording.stop_reason is not None or not recording.finished
        self.stop_reason = recording.stop_reason or "the recording ends without run_finished (the agent died)"
        self.divergence: Divergence | None = None
        self.stopped: str | None = None
        self.frontier = frontier or Frontier()
        self._recorded_paths = sorted({str(recording.run_dir), str(recording.run_dir.resolve()),
                                       *recording.named_as}, key=len, reverse=True)
        self._replay_paths = sorted(set(replay_paths), key=len, reverse=True)
        self._lock = threading.Lock()
        self._open: dict[str, str] = {}  # lane → step whose span is open in the replay

    def begin(self, attempt: int) -> None:
        self.current = attempt
        self._open = {}

    def _queue(self, event: dict) -> deque[dict] | None:
        queues = self.expected[self.current] if self.current < len(self.expected) else {}
        return queues.get(_queue_of(event))

    def admit(self, event: dict) -> None:
        """Trace gate, before an event is written: hold a lane that is past the record's attempt."""
        if threading.current_thread() is not threading.main_thread() and self.frontier.past:
            raise ReplayCut("the recorded attempt stopped before this")
        if not self.frontier.active or not self._is_decision(event, peek=True) or self._queue(event):
            return
        self.frontier.freeze(f"{event['lane']} {event['type']} {event.get('tool') or event.get('node') or ''}".strip(),
                             self.all_matched)

    def all_matched(self) -> bool:
        """Every recorded decision of the current attempt is reproduced (but an interrupted one's finish)."""
        with self._lock:
            left = [e for q in self.expected[self.current].values() for e in q]
        attempt = self.attempts[self.current]
        return not left or (attempt.interrupted and len(left) == 1 and left[0]["type"] == "run_finished")

    def observe(self, event: dict) -> None:
        """Trace listener: every event the replay writes comes through here."""
        with self._lock:
            if self.divergence is not None or self.stopped is not None:
                return
            if not self._is_decision(event):
                return
            queue = self._queue(event)
            if not queue:
                if self.truncated and self.current == len(self.expected) - 1:
                    self.stopped = f"replay reached the end of the record in lane {event['lane']}: {self.stop_reason}"
                    self._end(ReplayStop(self.stopped))
                self.divergence = Divergence(None, event, event["lane"])
                self._end(ReplayDivergence(self.divergence))
            want = queue[0]
            if want["type"] == "tool_result" and "data" not in want:  # recorded before results carried outcomes
                event = {k: v for k, v in event.items() if k not in ("data", "reason")}
            if self._comparable(want) != self._comparable(event):
                self.divergence = Divergence(want, event, event["lane"])
                self._end(ReplayDivergence(self.divergence))
            queue.popleft()
            self.matched += 1
        if self.frontier.active and self.all_matched():
            self.frontier.reach()

    def _end(self, reason: BaseException) -> NoReturn:
        # The replay is over: a lane held at the frontier is cut now, not after FREEZE_LIMIT_S (the
        # graph waits for every lane of a superstep before it lets the lane's divergence out).
        self.frontier.release()
        raise reason

    def _comparable(self, event: dict) -> tuple:
        # Served values carry the recorded folder's path, re-derived ones the replay's: both read <RUN>.
        paths = sorted({*self._recorded_paths, *self._replay_paths}, key=len, reverse=True)
        return event["type"], with_placeholders(normalized(event), paths)

    def _is_decision(self, event: dict, peek: bool = False) -> bool:
        # Same rule as record.classify, applied live: in replay no adapter runs, so the only
        # events inside a step span are the tool_call/tool_result pair itself.
        lane, kind = event["lane"], event["type"]
        if lane == "llm":
            return not self._open
        if not peek and kind == "tool_call" and lane in ORCHESTRATION_LANES:
            self._open[lane] = event["tool"]
        elif not peek and kind == "tool_result" and lane in ORCHESTRATION_LANES:
            self._open.pop(lane, None)
        return kind not in ("job_launched", "job_state", "job_finished")

    def finish(self) -> Divergence | None:
        """After the replay ended normally: a recorded decision it did not make, if any."""
        if self.divergence is not None or self.stopped is not None:
            return self.divergence
        leftovers = [q[0] for queues in self.expected for q in queues.values() if q]
        if not leftovers:
            return None
        first = min(leftovers, key=lambda e: e["seq"])
        self.divergence = Divergence(first, None, first["lane"])
        return self.divergence
