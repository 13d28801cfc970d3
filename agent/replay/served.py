"""What a replay serves from the record instead of running: preflight, step outcomes, LLM answers.

``ReplaySource`` is the run's ``rt.source`` (``agent.record_source.RecordSource``): the preflight
node gets the recorded preflight from it, ``agent.lanes.run_step`` a step's recorded outcome
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

from agent.llm.client import LLMError, new_input
from agent.replay.checker import Divergence, ReplayDivergence, ReplayStop
from agent.replay.record import Recording, classify, step_results
from agent.config import Settings
from agent.preflight import Preflight
from agent.runfolder import RunFolder
from agent.steps.base import PlanStep, StepOutcome
from agent.trace import TraceWriter, redact
from tools.jobs import Executor


class ReplaySource:
    def __init__(self, recording: Recording):
        self.recording = recording
        self._results = {kind: deque(events) for kind, events in step_results(recording.events).items()}

    def preflight(self, settings: Settings, executor: Executor) -> Preflight:
        if self.recording.preflight is None:
            raise ReplayStop("the record has no preflight.json (the run died before preflight finished)")
        return Preflight.model_validate(self.recording.preflight)

    def step_outcome(self, run: RunFolder, step: PlanStep, execute: Callable[[], StepOutcome]) -> StepOutcome:
        queue = self._results.get(step.kind)
        if not queue:
            raise ReplayStop(f"the record has no result for step {step.kind}: "
                             f"{self.recording.stop_reason or 'the run ended inside this step'}")
        event = queue.popleft()
        outcome = StepOutcome(kind=step.kind, status=event["status"], summary=event.get("summary", ""),
                              artifacts=event.get("artifacts", []))
        saved = self.recording.step_files.get(step.kind)
        if saved and (saved.get("status"), saved.get("summary")) == (outcome.status, outcome.summary):
            outcome = StepOutcome.model_validate(saved)  # the file also holds the step's data
        for relative in outcome.artifacts:
            self._copy_artifact(run, relative)
        return outcome

    def span_outcome(self, run: RunFolder, tool: str, outcome_file: Path, execute: Callable[[], dict]) -> dict:
        """The recorded ``tool_result`` of a span the orchestration runs outside the plan's steps
        (the LLM research, ``agent.llm.research``), with its recorded files copied in; the outcome
        is the recorded ``outcome_file`` when the record kept it, else what the event says."""
        queue = self._results.get(tool)
        if not queue:
            raise ReplayStop(f"the record has no result for {tool}: "
                             f"{self.recording.stop_reason or 'the run ended inside it'}")
        event = queue.popleft()
        for relative in event.get("artifacts", []):
            self._copy_artifact(run, relative)
        if outcome_file.exists():
            return json.loads(outcome_file.read_text())
        return {"status": event["status"], "summary": event.get("summary", ""), "artifacts": event.get("artifacts", [])}

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
    return json.loads(json.dumps(redact(value), default=str, ensure_ascii=False))


class ReplayLLM:
    """Test double for ``LLMClient`` in replay: answers from the record, never opens a connection."""

    def __init__(self, recording: Recording, trace: TraceWriter):
        decisions, _ = classify(recording.events)
        self._trace = trace
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
            raise ReplayStop(f"the record ends before the answer to LLM call {request.get('call')}")
        last = responses[-1]
        if last.get("status") != "ok":
            raise LLMError(f"recorded LLM failure replayed: {last.get('error', 'no answer')}")
        return {**last["message"], "usage": last.get("usage", {})}
