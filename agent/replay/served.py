"""What a replay serves from the record instead of running: preflight, step outcomes, LLM answers.

``ReplaySource`` is the run's ``rt.source`` (``agent.campaign.record_source.RecordSource``): the preflight
node gets the recorded preflight from it, ``agent.campaign.lanes.run_step`` a step's recorded outcome
instead of running the step (no GPU, no network, no jobs), the research lane its recorded span.
``ReplayLLM`` is the run's ``rt.llm``, with ``LLMClient.chat``'s signature: it checks each request
against the recorded one and answers with the recorded reply, writing the same
``llm_request``/``llm_response`` events the real client wrote.
"""
from __future__ import annotations

import json
import shutil
from collections import deque
from pathlib import Path
from typing import Callable

from tools import json_data
from agent.run.run_files import read_run_json, step_file
from agent.campaign.llm.client import LLMError, new_input
from agent.replay.checker import Divergence, ReplayDivergence, ReplayStop
from agent.replay.frontier import Frontier
from agent.replay.record import Recording, classify, step_results
from agent.settings.model import Settings
from agent.campaign.preflight import Preflight
from agent.run.folder import RunFolder
from agent.steps.base import PlanStep, StepOutcome
from agent.run.trace import TraceWriter, redact
from tools.jobs import Executor


class ReplaySource:
    """Serves the recorded world to a replay, attempt by attempt (``begin``), and checks what it
    serves: a step's recorded result must agree with the outcome file the step wrote
    (``steps/<kind>.json``), else the replay diverges at that event. A step, span or preflight the
    record's attempt has no result for is where that attempt stopped: the lane is held there."""

    starts_jobs = False

    def __init__(self, recording: Recording, frontier: Frontier | None = None):
        self.recording = recording
        self.frontier = frontier or Frontier()
        self.attempts = recording.attempts
        self.current = 0
        self._served: dict[str, deque[dict]] = {}
        self._last = {kind: events[-1]["seq"] for kind, events in step_results(recording.events).items()}
        self.begin(0)

    def begin(self, attempt: int) -> None:
        self.current = attempt
        record = self.attempts[attempt]
        kinds = {e["tool"] for e in record.decisions if e["type"] == "tool_result"}
        self._served = {kind: deque(record.results(kind)) for kind in kinds}

    def _next_result(self, where: str, tool: str) -> dict:
        queue = self._served.get(tool)
        if queue:
            return queue.popleft()
        if self.frontier.active:
            self.frontier.freeze(where, lambda: False)
        raise ReplayStop(f"the record has no result for {tool}: "
                         f"{self.recording.stop_reason or 'the run ended inside it'}")

    def preflight(self, settings: Settings, executor: Executor) -> Preflight:
        found = self.recording.preflight_of(self.current)
        if found is None:
            raise ReplayStop("the record has no preflight.json (the run died before preflight finished)")
        return Preflight.model_validate(found)

    def early_preflight(self, settings: Settings, executor: Executor) -> Preflight | None:
        found = self.recording.preflight_of(self.current)  # none: the graph's preflight node stops the replay
        return None if found is None else Preflight.model_validate(found)

    def step_outcome(self, run: RunFolder, step: PlanStep, execute: Callable[[], StepOutcome]) -> StepOutcome:
        event = self._next_result(f"step {step.kind}", step.kind)
        outcome = self._outcome(step.kind, event)
        for relative in outcome.artifacts:
            self._copy_artifact(run, relative)
        return outcome

    def _outcome(self, kind: str, event: dict) -> StepOutcome:
        saved = self.recording.step_files.get(kind)
        fields = {"status": event["status"], "summary": event.get("summary", ""), "artifacts": event.get("artifacts", [])}
        if "data" in event:  # a record with whole outcomes: the event is the outcome
            outcome = StepOutcome(kind=kind, reason=event.get("reason"), data=event.get("data") or {}, **fields)
            if event["seq"] == self._last[kind] and saved is not None:
                self._check(event, outcome.model_dump(mode="json"), saved, step_file(kind))
            return outcome
        if saved and (saved.get("status"), saved.get("summary")) == (fields["status"], fields["summary"]):
            return StepOutcome.model_validate(saved)  # an older record: the file holds the step's data
        return StepOutcome(kind=kind, **fields)

    @staticmethod
    def _check(event: dict, served: dict, kept: dict, where: str) -> None:
        """The result the trace recorded and the file the step wrote must tell the same outcome."""
        if {k: served.get(k) for k in kept} == kept:
            return
        shown = {**event, **{k: kept.get(k) for k in ("status", "summary", "artifacts", "reason", "data")}}
        raise ReplayDivergence(Divergence(event, shown, event["lane"], against=f"the outcome {where} holds",
                                          note="\n  (the trace or the file was changed after the run)"))

    def span_outcome(self, run: RunFolder, tool: str, outcome_file: Path, execute: Callable[[], dict]) -> dict:
        """The recorded ``tool_result`` of a span the orchestration runs outside the plan's steps
        (the LLM research, ``agent.campaign.llm.research``), with its recorded files copied in; the outcome
        is the recorded ``outcome_file`` when the record kept it, else what the event says."""
        event = self._next_result(f"span {tool}", tool)
        for relative in event.get("artifacts", []):
            self._copy_artifact(run, relative)
        if (kept := read_run_json(outcome_file)) is not None:
            return kept
        return {"status": event["status"], "summary": event.get("summary", ""), "artifacts": event.get("artifacts", [])}

    def running_jobs(self, executor: Executor) -> list[str] | None:
        """The jobs the recorded interrupt found running (a replay runs none); None when it did not list
        them (a second Ctrl-C came first)."""
        finish = self.attempts[self.current].finish or {}
        return finish.get("jobs_running")

    def stop_servers(self, run: RunFolder, executor: Executor) -> tuple[list, list[str]]:
        """The servers the recorded end could not stop (a replay starts none, so it stops none)."""
        finish = self.attempts[self.current].finish or {}
        return [], list(finish.get("servers_left") or [])

    def _copy_artifact(self, run: RunFolder, relative: str) -> None:
        # Later nodes (the report) read what steps wrote, so the replay folder gets the recorded files.
        source = (self.recording.run_dir / relative).resolve()
        if not source.is_relative_to(self.recording.run_dir.resolve()) or not source.exists():
            return  # a path outside the run or a file not kept: nothing to serve
        target = run.file(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)


def _as_recorded(value):
    """A value as it reads back from the trace (redacted, JSON round-tripped)."""
    return json_data.loads(json.dumps(redact(value), default=str, ensure_ascii=False))


class ReplayLLM:
    """Test double for ``LLMClient`` in replay: answers from the record, never opens a connection."""

    def __init__(self, recording: Recording, trace: TraceWriter, frontier: Frontier | None = None):
        decisions, _ = classify(recording.events)
        self._trace = trace
        self._frontier = frontier or Frontier()
        self._replies = _kept_replies(recording.run_dir)
        self._calls: deque[tuple[dict, list[dict]]] = deque()
        by_call: dict = {}
        for event in decisions:
            if event["type"] == "llm_request":
                by_call[event.get("call")] = (event, [])
                self._calls.append(by_call[event.get("call")])
            elif event["type"] == "llm_response" and event.get("call") in by_call:
                by_call[event["call"]][1].append(event)
        self.model = self._calls[0][0].get("model") if self._calls else None

    def chat(self, messages: list[dict], tools: list[dict], call: int | None = None) -> dict:
        if not self._calls:
            raise ReplayDivergence(Divergence(None, {"type": "llm_request", "lane": "llm",
                                                     "messages": _as_recorded(new_input(messages))}, "llm",
                                              note="\n  (the recording has no further LLM call)"))
        request, responses = self._calls.popleft()
        fields = {k: request[k] for k in ("call", "model", "stream") if k in request}
        self._trace.emit("llm_request", "llm", **fields, message_count=len(messages),
                         messages=new_input(messages), tools=[t["function"]["name"] for t in tools])
        for response in responses:  # retries too, without waiting
            self._trace.emit("llm_response", "llm", **{k: v for k, v in response.items()
                                                       if k not in ("v", "seq", "t", "mono", "pid", "lane", "type")})
        if not responses:
            if self._frontier.active:  # the recorded agent stopped while it waited for this answer
                self._frontier.freeze(f"the answer to LLM call {request.get('call')}", lambda: False)
            raise ReplayStop(f"the record ends before the answer to LLM call {request.get('call')}")
        last = responses[-1]
        if last.get("status") == "ok" and self._replies is not None and _as_recorded(last["message"]) not in self._replies:
            raise ReplayDivergence(Divergence(last, {**last, "message": "(no such reply)"}, "llm",
                                              against="the replies kept in llm/*.jsonl",
                                              note="\n  (the trace or the conversation file was changed after the run)"))
        if last.get("status") != "ok":
            raise LLMError(last.get("gave_up") or f"recorded LLM failure replayed: {last.get('error', 'no answer')}")
        return {**last["message"], "usage": last.get("usage", {})}


def _kept_replies(run_dir: Path) -> list[dict] | None:
    """Every assistant reply the run's conversations kept (llm/*.jsonl), or None without such files."""
    files = sorted((run_dir / "llm").glob("*.jsonl")) if (run_dir / "llm").is_dir() else []
    if not files:
        return None
    replies = []
    for path in files:
        for line in path.read_text(errors="replace").splitlines():
            try:
                entry = json_data.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line of a killed run; the trace's own record is checked elsewhere
            if isinstance(entry, dict) and entry.get("kind") == "reply":
                replies.append(_as_recorded(entry.get("message")))
    return replies
