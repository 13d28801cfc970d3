"""Compares the decisions a replay makes, as it makes them, with the recorded ones.

The two lanes run on two threads, so their events interleave differently on every run; order is
compared within each lane (control, gpu, research, llm), which is what the graph fixes. The first
difference stops the replay (``ReplayDivergence``); running out of record in a truncated trace
stops it too (``ReplayStop``), after everything up to the last good event has been checked.
Both are ``BaseException`` so that no step's error handling can swallow them.
"""
from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass

from agent.replay.record import ORCHESTRATION_LANES, Recording, classify, normalized


@dataclass
class Divergence:
    expected: dict | None       # the recorded event (None: the replay made one more than the record has)
    got: dict | None            # the replayed event (None: the replay ended without making it)
    lane: str
    note: str = ""

    def describe(self) -> str:
        if self.expected is None:
            return (f"replay made an event the recording does not have in lane {self.lane}: "
                    f"{_brief(self.got)}{self.note}")
        where = f"recorded event #{self.expected['seq']} (line {self.expected['seq'] + 1}, lane {self.lane}, " \
                f"{self.expected['type']})"
        if self.got is None:
            return f"{where} was not reproduced: the replay ended without it{self.note}"
        lines = [f"{where} differs from replayed event #{self.got['seq']}:"]
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


class DecisionChecker:
    def __init__(self, recording: Recording):
        decisions, _ = classify(recording.events)
        self.expected: dict[str, deque[dict]] = {}
        for event in decisions:
            self.expected.setdefault(event["lane"], deque()).append(event)
        self.total = len(decisions)
        self.matched = 0
        self.truncated = recording.stop_reason is not None or not recording.finished
        self.stop_reason = recording.stop_reason or "the recording ends without run_finished (the agent died)"
        self.divergence: Divergence | None = None
        self.stopped: str | None = None
        self._lock = threading.Lock()
        self._open: dict[str, str] = {}  # lane → step whose span is open in the replay

    def observe(self, event: dict) -> None:
        """Trace listener: every event the replay writes comes through here."""
        with self._lock:
            if self.divergence is not None or self.stopped is not None:
                return
            if not self._is_decision(event):
                return
            queue = self.expected.get(event["lane"])
            if not queue:
                if self.truncated:
                    self.stopped = f"replay reached the end of the record in lane {event['lane']}: {self.stop_reason}"
                    raise ReplayStop(self.stopped)
                self.divergence = Divergence(None, event, event["lane"])
                raise ReplayDivergence(self.divergence)
            want = queue[0]
            if normalized(want) != normalized(event) or want["type"] != event["type"]:
                self.divergence = Divergence(want, event, event["lane"])
                raise ReplayDivergence(self.divergence)
            queue.popleft()
            self.matched += 1

    def _is_decision(self, event: dict) -> bool:
        # Same rule as record.classify, applied live: in replay no adapter runs, so the only
        # events inside a step span are the tool_call/tool_result pair itself.
        lane, kind = event["lane"], event["type"]
        if kind == "tool_call" and lane in ORCHESTRATION_LANES:
            self._open[lane] = event["tool"]
        elif kind == "tool_result" and lane in ORCHESTRATION_LANES:
            self._open.pop(lane, None)
        return not (lane == "llm" and self._open)

    def finish(self) -> Divergence | None:
        """After the replay ended normally: a recorded decision it did not make, if any."""
        if self.divergence is not None or self.stopped is not None:
            return self.divergence
        leftovers = [q[0] for q in self.expected.values() if q]
        if not leftovers:
            return None
        first = min(leftovers, key=lambda e: e["seq"])
        self.divergence = Divergence(first, None, first["lane"])
        return self.divergence
