"""Tool dispatch for the model: validate arguments → call → capped observation → trace events.

Whose fault decides what happens:
- the model's (unknown tool, arguments that are not JSON or fail validation): an observation
  saying what was wrong, so the model can correct itself;
- an expected operational failure (``ToolError``): an observation with status ``error``;
- anything else is a bug or an environment failure: it propagates and ends the run.
Results are data read from repositories/logs/servers: they reach the model only through
``quote_untrusted``, with their origin.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ValidationError

from agent.campaign.llm.prompts import quote_untrusted
from agent.campaign.llm.registry import Registry
from agent.run.trace import TraceWriter
from tools.base import ToolError, cap_lines

MAX_LINES = 400
MAX_CHARS = 12_000

Status = Literal["ok", "error", "bad_arguments", "unknown_tool"]


@dataclass
class Observation:
    status: Status
    text: str  # the tool message content the model receives


def bad_arguments(name: str, err: ValidationError) -> str:
    """The observation for arguments that do not fit a tool's schema: each problem with where it is."""
    problems = "\n".join(f"- {'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                         for e in err.errors()[:10])
    return f"status: bad_arguments\nThe arguments of {name} do not fit its schema:\n{problems}"


def _origin(name: str, args: BaseModel, result: BaseModel) -> str:
    """Where the data came from: a file and lines when the result says so, else the call."""
    data = result.model_dump()
    path = data.get("path")
    start = data.get("start_line") or data.get("start")
    end = data.get("end_line") or data.get("end")
    if isinstance(path, str) and start:
        return f"{path}:{start}-{end or start} (tool {name})"
    shown = json.dumps(args.model_dump(mode="json"), default=str)
    return f"tool {name}({shown[:200]})"


def render_result(result: BaseModel) -> str:
    lines = json.dumps(result.model_dump(mode="json"), indent=1, default=str).splitlines()
    capped = cap_lines(lines, MAX_LINES, MAX_CHARS)
    return capped.text + (f"\n{capped.note}" if capped.truncated else "")


def dispatch(registry: Registry, call: dict, trace: TraceWriter, submit: str = "submit_plan") -> Observation:
    """Run one tool call of the model's; ``submit`` names the tool it answers with (listed for it
    when it calls a tool that does not exist)."""
    name = call.get("function", {}).get("name", "")
    raw_text = call.get("function", {}).get("arguments") or "{}"
    trace.emit("tool_call", "llm", tool=name, call_id=call.get("id", ""), args=traced_args(raw_text))
    started = time.monotonic()
    observation = _run(registry, name, raw_text, submit)
    trace.emit("tool_result", "llm", tool=name, call_id=call.get("id", ""), status=observation.status,
               summary=observation.text.splitlines()[0], chars=len(observation.text),
               seconds=round(time.monotonic() - started, 3))
    return observation


def traced_args(raw_text: str) -> dict:
    """Arguments as the trace records them: the parsed object, or the raw text when it is not one."""
    try:
        parsed = json.loads(raw_text or "{}")
    except json.JSONDecodeError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"unparsed": (raw_text or "")[:4000]}


def _run(registry: Registry, name: str, raw_text: str, submit: str) -> Observation:
    entry = registry.tools.get(name)
    if entry is None:
        known = ", ".join(sorted(registry.tools)) or "none"
        why = f" ({registry.withheld[name]})" if name in registry.withheld else ""
        return Observation("unknown_tool", f"status: unknown_tool\nThere is no tool named {name[:80]!r}{why}. "
                                           f"Tools you can call: {known}, {submit}.")
    try:
        raw = json.loads(raw_text)
    except json.JSONDecodeError as err:
        return Observation("bad_arguments", f"status: bad_arguments\nThe arguments of {name} are not valid "
                                            f"JSON ({err.msg} at character {err.pos}). Send a JSON object.")
    if not isinstance(raw, dict):
        return Observation("bad_arguments", f"status: bad_arguments\nThe arguments of {name} must be a JSON "
                                            f"object, got {type(raw).__name__}.")
    try:
        args = entry.tool.args.model_validate(entry.arguments(raw))
    except ValidationError as err:
        return Observation("bad_arguments", bad_arguments(name, err))
    try:
        result = entry.tool.run(args)
    except ToolError as err:
        return Observation("error", f"status: error\n{quote_untrusted(str(err), f'tool {name} error')}")
    return Observation("ok", f"status: ok\n{quote_untrusted(render_result(result), _origin(name, args, result))}")
