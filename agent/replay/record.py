"""A recorded run, read for replay: its goal and settings, its attempts, and what cut it short.

Unlike ``read_trace`` (resume refuses a corrupt trace), this keeps every event up to the first bad
line and says why it stopped. Attempts start with ``run_started``/``run_resumed`` and end with
``run_finished``, or without it when killed. Events a step emits between its ``tool_call`` and
``tool_result``, and LLM exchanges while a step is open, are *tool internals* (served, not re-run);
everything else the orchestration emits is a *decision*, compared on replay without the fields
that change from run to run (``VOLATILE``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from agent.run.folder import read_result
from agent.run.run_files import RESULT, STEPS, RunFiles, step_file
from agent.run.trace import Lane, TraceError
from agent.run.trace import read_events as read_good_events

VOLATILE = frozenset({"v", "seq", "t", "mono", "pid", "ms", "seconds", "run", "argv", "bytes", "traceback",
                      "signal_at", "checkpoint_id"})
ORCHESTRATION_LANES = tuple(lane for lane in get_args(Lane) if lane != "llm")  # the LLM's exchanges are its own
NESTED_VOLATILE = frozenset({"seconds", "ms", "t", "mono", "pid"})


class RecordError(Exception):
    """The run folder cannot be replayed at all; the message says why and what to do."""


@dataclass
class Attempt:
    """One run of the agent on the run folder: ``run_started`` or a ``run_resumed`` and what followed."""

    index: int                              # 0 for the first
    events: list[dict]

    @property
    def opening(self) -> dict:
        return self.events[0]

    @property
    def finish(self) -> dict | None:
        return next((e for e in self.events if e["type"] == "run_finished"), None)

    @property
    def killed(self) -> bool:
        """The agent died in it (no run_finished), so it stopped at an arbitrary point."""
        return self.finish is None

    @property
    def interrupted(self) -> bool:
        """It recorded its end, but wherever a signal or a full disk found it (not at a step's end)."""
        return self.finish is not None and (self.finish.get("status") == "interrupted" or self.disk_full)

    @property
    def disk_full(self) -> bool:
        return self.finish is not None and self.finish.get("reason") == "disk_full"

    @property
    def decisions(self) -> list[dict]:
        return _classify_one(self.events)[0]

    def results(self, tool: str) -> list[dict]:
        """This attempt's recorded results of a step (or span) kind, in order."""
        return [e for e in self.decisions if e["type"] == "tool_result" and e["lane"] in ORCHESTRATION_LANES
                and e["tool"] == tool]


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
    preflights: dict[int, dict] = field(default_factory=dict)  # preflight.attempt-N.json of earlier attempts

    @property
    def finished(self) -> bool:
        return any(e["type"] == "run_finished" for e in self.events)

    @property
    def uses_llm(self) -> bool:
        return any(e["type"] == "llm_request" for e in self.events)

    @property
    def attempts(self) -> list[Attempt]:
        return split_attempts(self.events)

    @property
    def named_as(self) -> list[str]:
        """How the recorded agent named its run folder (result.json's ``run``: relative when started so)."""
        paths = [self.run_dir / RESULT, *sorted(self.run_dir.glob("result.attempt-*.json"))]
        results = [read_result(path) for path in paths]  # a damaged one is named in one line
        return [str(result["run"]) for result in results if result and "run" in result]

    def preflight_of(self, attempt: int) -> dict | None:
        """What preflight found in attempt ``attempt`` (0-based): its kept copy, else the last one."""
        return self.preflights.get(attempt + 1, self.preflight)


def split_attempts(events: list[dict]) -> list[Attempt]:
    attempts: list[Attempt] = []
    for event in events:
        if not attempts or event["type"] == "run_resumed":
            attempts.append(Attempt(index=len(attempts), events=[]))
        attempts[-1].events.append(event)
    return attempts


def read_events(path: Path) -> tuple[list[dict], str | None]:
    """The trace's good events and why reading stopped early (agent.run.trace.read_events), for replay."""
    if not path.exists():
        raise RecordError(f"{path} does not exist: this run has no trace to replay (was it made by dsv4-agent?)")
    try:
        return read_good_events(path)
    except TraceError as err:  # a line no event could be (over the cap): one line, naming the file
        raise RecordError(str(err)) from None


def load_recording(run_dir: Path | str) -> Recording:
    run_dir = Path(run_dir)
    run = RunFiles(run_dir)
    config = run.config()
    if config is None or "goal" not in config:
        raise RecordError(f"{run_dir} has no config.json with the goal: not a dsv4-agent run folder")
    events, stop = read_events(run_dir / "trace.jsonl")
    if not events:
        raise RecordError(f"{run_dir}/trace.jsonl holds no readable event ({stop or 'empty file'}); nothing to replay")
    steps_dir = run_dir / STEPS  # as written: replay checks each against the outcome its trace event served
    steps = {p.stem: run.json_object(step_file(p.stem)) for p in sorted(steps_dir.glob("*.json"))}
    kept = {int(p.name.split("-")[1].split(".")[0]): run.json_object(p.name)
            for p in run_dir.glob("preflight.attempt-*.json")}
    return Recording(run_dir=run_dir, goal=config["goal"], settings=config.get("settings", {}), events=events,
                     stop_reason=stop, plan=run.plan(), preflight=run.preflight(), step_files=steps, preflights=kept)


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
    """Split events into (decisions, tool-internal events), both in file order, attempt by attempt."""
    decisions: list[dict] = []
    internal: list[dict] = []
    for attempt in split_attempts(events):
        mine, theirs = _classify_one(attempt.events)
        decisions += mine
        internal += theirs
    return decisions, internal


def _classify_one(events: list[dict]) -> tuple[list[dict], list[dict]]:
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
