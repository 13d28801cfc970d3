"""A recorded run, read for replay: its goal and settings, its good events, and what cut it short.

Unlike ``agent.trace.read_trace`` (which refuses a corrupt trace outright, because a run must not
be resumed on top of one), this reader keeps every event up to the first bad line and records
why it stopped, so replay can re-drive the run up to there and then say so.

Which events are *decisions* (compared on replay) and which are *tool internals* (served, not
re-run): events a step adapter emits between its ``tool_call`` and ``tool_result`` in its lane
belong to the tool; so do LLM exchanges made while any step is open (steps call the LLM, the
orchestration does not, once the lanes run). Everything else the orchestration emits is a
decision. Fields that change from run to run (times, pids, folder names) are left out of the
comparison: ``VOLATILE``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.trace import read_events as read_good_events

VOLATILE = frozenset({"v", "seq", "t", "mono", "pid", "ms", "seconds", "run", "argv", "bytes", "thread"})
ORCHESTRATION_LANES = ("control", "gpu", "research")


class RecordError(Exception):
    """The run folder cannot be replayed at all; the message says why and what to do."""


@dataclass
class Recording:
    run_dir: Path
    goal: str
    settings: dict[str, Any]
    events: list[dict]                      # every good event, in file order
    stop_reason: str | None = None          # why reading stopped early (corrupt/torn line), else None
    plan: list[dict] | None = None          # plan.json, when the run got that far
    preflight: dict | None = None           # preflight.json (the last attempt's)
    step_files: dict[str, dict] = field(default_factory=dict)  # steps/<kind>.json

    @property
    def finished(self) -> bool:
        return any(e["type"] == "run_finished" for e in self.events)

    @property
    def uses_llm(self) -> bool:
        return any(e["type"] == "llm_request" for e in self.events)

    @property
    def attempts(self) -> int:
        return 1 + sum(e["type"] == "run_resumed" for e in self.events)


def read_events(path: Path) -> tuple[list[dict], str | None]:
    """The trace's good events and why reading stopped early (agent.trace.read_events), for replay."""
    if not path.exists():
        raise RecordError(f"{path} does not exist: this run has no trace to replay (was it made by dsv4-agent?)")
    return read_good_events(path)


def _optional_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def load_recording(run_dir: Path | str) -> Recording:
    run_dir = Path(run_dir)
    config = _optional_json(run_dir / "config.json")
    if not isinstance(config, dict) or "goal" not in config:
        raise RecordError(f"{run_dir} has no config.json with the goal: not a dsv4-agent run folder")
    events, stop = read_events(run_dir / "trace.jsonl")
    if not events:
        raise RecordError(f"{run_dir}/trace.jsonl holds no readable event ({stop or 'empty file'}); nothing to replay")
    steps = {p.stem: json.loads(p.read_text()) for p in sorted((run_dir / "steps").glob("*.json"))}
    return Recording(run_dir=run_dir, goal=config["goal"], settings=config.get("settings", {}), events=events,
                     stop_reason=stop, plan=_optional_json(run_dir / "plan.json"),
                     preflight=_optional_json(run_dir / "preflight.json"), step_files=steps)


NESTED_VOLATILE = frozenset({"seconds", "ms", "t", "mono", "pid"})


def normalized(event: dict) -> dict:
    """The part of an event that must come out the same on replay (timings left out at any depth)."""
    return {k: _stable(v) for k, v in event.items() if k not in VOLATILE}


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in NESTED_VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def classify(events: list[dict]) -> tuple[list[dict], list[dict]]:
    """Split events into (decisions, tool-internal events), both in file order."""
    open_steps: dict[str, list[str]] = {}  # lane → tool calls open in it; the first is the step
    decisions: list[dict] = []
    internal: list[dict] = []
    for event in events:
        lane, kind = event["lane"], event["type"]
        stack = open_steps.setdefault(lane, [])
        if kind == "tool_call" and lane in ORCHESTRATION_LANES:
            (internal if stack else decisions).append(event)  # an adapter's own tool calls nest inside
            stack.append(event["tool"])
        elif kind == "tool_result" and lane in ORCHESTRATION_LANES and stack:
            stack.pop()
            (internal if stack else decisions).append(event)
        elif stack:
            internal.append(event)
        elif lane == "llm":
            (internal if any(open_steps.values()) else decisions).append(event)
        elif kind in ("job_launched", "job_state", "job_finished"):
            internal.append(event)  # jobs belong to the tool that launched them
        else:
            decisions.append(event)
    return decisions, internal


def step_results(events: list[dict]) -> dict[str, list[dict]]:
    """Recorded tool_result events of each step kind, in order (one per attempt that ran it)."""
    results: dict[str, list[dict]] = {}
    for event in classify(events)[0]:
        if event["type"] == "tool_result" and event["lane"] in ORCHESTRATION_LANES:
            results.setdefault(event["tool"], []).append(event)
    return results
