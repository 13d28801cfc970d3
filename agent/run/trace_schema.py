"""The trace format, as data: one pydantic model per event type, and the version rule.

Every line of ``trace.jsonl`` is one event: an envelope (``v``, ``seq``, ``t``, ``mono``, ``pid``,
``lane``, ``type``) plus the fields of its type. Types name the fields they always carry; any
other field is allowed (steps attach small facts to ``progress`` and ``artifact_written``), so
models are ``extra="allow"``. ``docs/trace.schema.json`` is generated from these models
(``python -m agent.run.trace_schema > docs/trace.schema.json``) and a test keeps it in step.

Versions: readers accept ``SUPPORTED_VERSIONS``; anything else is refused with a message that
says which version it is and what to do (see ``version_problem``).
"""
from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.exit_codes import RunStatus
from agent.run.trace_versions import SCHEMA_VERSION, SUPPORTED_VERSIONS, Lane, version_problem  # noqa: F401 - the format this code writes (docs/trace.md)


class Envelope(BaseModel):
    """Fields every event carries."""

    # Each model's validator is built when its first event is checked: a run writes a handful of
    # types before its first GPU job, and building all of them then would delay it.
    model_config = ConfigDict(extra="allow", defer_build=True)
    v: int = Field(description="Trace schema version of this event")
    seq: int = Field(ge=0, description="0-based, gap-free position in the run's trace")
    t: float = Field(description="Wall clock, epoch seconds")
    mono: float = Field(description="Monotonic seconds; comparable only between events of one pid")
    pid: int = Field(description="Agent process that wrote the event (changes on resume)")
    lane: Lane = Field(description="Which lane emitted it")


class RunStarted(Envelope):
    type: Literal["run_started"]
    goal: str = Field(description="The campaign goal as typed")
    run: str = Field(description="Run folder name")
    argv: list[str] = Field(default_factory=list, description="Command-line words after the program")
    started_over: str | None = Field(None, description="Set by a resume that found no event yet: why it started over")
    config_file: dict[str, str] | None = Field(None, description="The settings file read (path, how it was chosen: "
                                               "--config, $DSV4_CONFIG or working folder, sha256); None: none")
    checkpoints_traced: bool = Field(False, description="This attempt records each checkpoint the graph saves "
                                     "(checkpoint_saved); False in runs recorded before it did")


class DroppedTail(BaseModel):
    bytes: int = Field(description="Bytes cut off after the last good event")
    lines: int = Field(description="Lines they made")
    why: str = Field(description="What the first of them was: torn, not UTF-8, not JSON, not an event")


class RunResumed(Envelope):
    type: Literal["run_resumed"]
    run: str = Field(description="Run folder name")
    thread: str = Field(description="Graph thread of this attempt, e.g. attempt-2")
    after: str | None = Field(None, description="Exit status of the previous attempt, if it recorded one")
    changed: dict[str, Any] = Field(default_factory=dict, description="Settings given anew on resume, new values")
    previous: dict[str, Any] = Field(default_factory=dict, description="The same settings' values before")
    retry_granted: list[str] = Field(default_factory=list, description="Job attempts --retry-failed let run again")
    redone: list[str] = Field(default_factory=list, description="Finished steps run again: settings they were made "
                                                                "from (this host's paths) changed")
    dropped_tail: DroppedTail | None = Field(None, description="What a crash left at the trace's end, cut off")
    seq_gaps: list[str] = Field(default_factory=list, description="Sequence gaps found in the trace, described")
    checkpoints_traced: bool = Field(False, description="As in run_started")
    gpus_changed: str | None = Field(None, description="How the GPUs (and TP) chosen now differ from the last "
                                     "attempt's: this attempt planned again on them, from the start")
    rebuilt_checkpoint: str | None = Field(None, description="Why the checkpoint was set aside (resume "
                                           "--rebuild-checkpoint): this attempt started the graph afresh")


class CheckpointSaved(Envelope):
    type: Literal["checkpoint_saved"]
    step: int | None = Field(None, description="LangGraph's superstep number of the checkpoint")
    checkpoint_id: str = Field(description="Its id in checkpoint.sqlite; a resume drops any checkpoint the trace "
                                           "does not record (saved just before a kill), so the trace decides")


class RunFinished(Envelope):
    type: Literal["run_finished"]
    status: RunStatus = Field(description="Exit status, also in result.json")
    summary: str = Field(description="One line: each step's outcome")
    signal: str | None = Field(None, description="The signal that interrupted the run (status interrupted)")
    signal_at: float | None = Field(None, description="When the agent took that signal (wall time): no side effect "
                                                      "(an install) begins after it")
    jobs_running: list[str] | None = Field(None, description="Jobs left running when interrupted (None: not listed)")
    reason: str | None = Field(None, description="Why a failed run ended where it did: disk_full (no space left on "
                                                 "the disk holding the run folder), server_not_stopped (its work "
                                                 "was done but a server of it still runs), else None")
    servers_left: list[str] | None = Field(None, description="Why each server job of the run that could not be "
                                                             "stopped as it ended still runs (None: none left)")


class NodeStarted(Envelope):
    type: Literal["node_started"]
    node: str = Field(description="Graph node name")


class NodeFinished(Envelope):
    type: Literal["node_finished"]
    node: str = Field(description="Graph node name")
    ms: float = Field(description="Milliseconds the node took")


class ToolCall(Envelope):
    type: Literal["tool_call"]
    tool: str = Field(description="Step kind or tool name")
    args: dict[str, Any] = Field(default_factory=dict, description="Step parameters / tool arguments")


class ToolResult(Envelope):
    type: Literal["tool_result"]
    tool: str = Field(description="Step kind or tool name")
    status: str = Field(description="done | planned | skipped | failed (steps)")
    summary: str = Field("", description="One line for the reader")
    artifacts: list[str] = Field(default_factory=list, description="Files written, relative to the run folder")
    reason: str | None = Field(None, description="A step's reason code (agent/run/step_outcome.py StepReason)")
    data: dict[str, Any] | None = Field(None, description="A step's outcome data, as in steps/<kind>.json")
    seconds: float | None = Field(None, description="Wall seconds the call took")


class JobLaunched(Envelope):
    type: Literal["job_launched"]
    key: str = Field(description="Job key, unique in the run")
    gpus: list[int] | None = Field(None, description="GPU indices given to the job (None: inherited)")


class JobStateEvent(Envelope):
    type: Literal["job_state"]
    key: str = Field(description="Job key")
    status: str = Field(description="Job status at this poll")


class JobFinished(Envelope):
    type: Literal["job_finished"]
    key: str = Field(description="Job key")
    status: str = Field(description="Terminal job status: succeeded | failed | timed_out | stopped | lost")


class ArtifactWritten(Envelope):
    type: Literal["artifact_written"]
    path: str = Field(description="File written, relative to the run folder")
    bytes: int | None = Field(None, description="Size written")


class LlmRequest(Envelope):
    type: Literal["llm_request"]


class LlmResponse(Envelope):
    type: Literal["llm_response"]


class Progress(Envelope):
    type: Literal["progress"]
    message: str = Field(description="A line for the live view")


class ErrorEvent(Envelope):
    type: Literal["error"]
    error: str = Field(description="Exception class name, or a short code for a problem a tool reported")
    message: str = Field(description="What went wrong")


class SearchBudget(Envelope):
    type: Literal["search_budget"]
    why: str = Field(description="What prompted the re-estimate")
    budget_s: float = Field(description="--budget, seconds of GPU time")
    spent_s: float = Field(description="GPU time the search has spent, every attempt counted")
    left_s: float = Field(description="budget_s - spent_s")
    estimate_s: float = Field(description="The work left, priced at the costs seen on this host")
    server_start_s: float = Field(description="Mean server start seen (the prior before one was seen)")
    repeat_s: dict[str, float] = Field(description="concurrency -> mean seconds of one repeat of a point")


class SearchDrop(Envelope):
    type: Literal["search_drop"]
    variant: str = Field(description="The candidate dropped after its first look")
    levels: dict[str, dict[str, Any]] = Field(description="concurrency -> its TPOT range, the best's and the "
                                              "ratio's low (tools/measure/search_rules.py LevelEvidence)")


class SearchRepeat(Envelope):
    type: Literal["search_repeat"]
    variant: str = Field(description="A survivor granted the remaining repeats")
    repeats: int = Field(description="Repeats per concurrency it will have")
    estimate_s: float = Field(description="What they are estimated to cost")
    left_s: float = Field(description="Budget left when they were granted")
    rank: int = Field(description="Its place among the survivors (baseline first, then fastest first look)")


# Every event type is a model above: a new type is one new model, which the writer, the readers and
# docs/trace.schema.json take from here.
EVENT_MODELS: dict[str, type[Envelope]] = {
    m.model_fields["type"].annotation.__args__[0]: m for m in Envelope.__subclasses__()  # type: ignore[union-attr]
}


class EventError(ValueError):
    """One event does not match the format; the message names the field."""


def validate_event(event: dict) -> Envelope:
    """The typed event; ``EventError`` naming the type and the first bad field otherwise."""
    problem = version_problem(event.get("v"))
    if problem:
        raise EventError(problem)
    model = EVENT_MODELS.get(event.get("type"))  # type: ignore[arg-type]
    if model is None:
        raise EventError(f"unknown event type {event.get('type')!r} (known: {', '.join(sorted(EVENT_MODELS))})")
    try:
        return model.model_validate(event)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "?"
        raise EventError(f"{event.get('type')} event: field {where!r}: {first['msg']}") from None


def json_schema() -> dict:
    """JSON schema of one trace line: a union discriminated by ``type``."""
    defs: dict[str, Any] = {}
    refs = []
    for model in EVENT_MODELS.values():
        schema = model.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(schema.pop("$defs", {}))
        defs[model.__name__] = schema
        refs.append({"$ref": f"#/$defs/{model.__name__}"})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"dsv4-agent trace event (format v{SCHEMA_VERSION})",
        "description": "One line of runs/<id>/trace.jsonl. See docs/trace.md.",
        "oneOf": refs,
        "discriminator": {"propertyName": "type"},
        "$defs": defs,
    }


def main() -> None:
    print(json.dumps(json_schema(), indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
