"""Views of a run folder for ``status`` and ``jobs``: data first (``--json``), text rendered from it.

Text from a run (summaries written from logs or an LLM) is data: control characters are shown
escaped, never sent to the terminal.
"""
from __future__ import annotations

import shutil
import textwrap
import time
from typing import TYPE_CHECKING

from agent.run.folder import RunFolder, RunFolderError
from agent.run.run_files import step_file
from agent.terminal.printable import gpu_list, one_line
from agent.run.trace_read import TraceError, count_events

if TYPE_CHECKING:
    from tools.jobs import JobState  # status reads no job: pydantic stays unimported

printable = one_line  # one line of terminal-safe text (agent/terminal/printable.py)


def _table(rows: list[list[str]], header: list[str], wrap_last: bool = False) -> str:
    """Columns padded to their widest cell; with ``wrap_last`` the last column wraps (nothing is cut)."""
    rows = [[printable(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    start = sum(widths[:-1]) + 2 * (len(widths) - 1)  # where the last column begins
    room = max(30, shutil.get_terminal_size((100, 24)).columns - start)
    if wrap_last:
        widths[-1] = min(widths[-1], room)

    def line(cells: list[str]) -> str:
        head = "  ".join(f"{c:<{w}}" for c, w in zip(cells[:-1], widths[:-1], strict=True))
        last = cells[-1]
        if wrap_last and len(last) > room:
            last = ("\n" + " " * start).join(textwrap.wrap(last, room, break_long_words=False, break_on_hyphens=False))
        return (f"{head}  {last}" if head else last).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def job_data(job: JobState | dict, now: float | None = None) -> dict:
    """A job as ``jobs --json`` shows it; ``job`` is a ``JobState`` or its fields (tools/jobs/ledger/listing.py)."""
    fields = job if isinstance(job, dict) else job.model_dump(mode="json")
    now = time.time() if now is None else now
    took = (fields["ended_at"] or now) - fields["launched_at"] if fields["launched_at"] else None
    return {**fields, "elapsed_s": round(took, 3) if took is not None else None}


def jobs_data(jobs: list[JobState] | list[dict]) -> list[dict]:
    """The jobs in the order they were launched in (one never launched last), as the live view showed them."""
    found = [job_data(j) for j in jobs]
    return sorted(found, key=lambda j: (j["launched_at"] is None, j["launched_at"] or 0.0, j["key"]))


def render_jobs(jobs: list[JobState] | list[dict]) -> str:
    if not jobs:
        return "no jobs in this run"
    rows = []
    for data in jobs_data(jobs):
        took, at = data["elapsed_s"], data["launched_at"]
        rows.append([data["key"], data["kind"], data["status"], gpu_list(data["gpus"]),
                     time.strftime("%H:%M:%S", time.gmtime(at)) if at else "-",
                     f"{took:.1f}s" if took is not None else "-", data["reason"] or ""])
    return _table(rows, ["job", "kind", "status", "gpus", "started (UTC)", "time", "note"], wrap_last=True)


def render_runs(entries: list) -> str:
    """``runs``: one line per run (agent/run/listing.py's entries, newest last) under a header."""
    rows = [[e.name, e.status, e.goal or ""] for e in entries]
    return _table(rows, ["run", "status", "goal"], wrap_last=True)


def verdict_line(verdict: dict) -> str:
    """The decision as the campaign's last lines say it: ``deploy X: why`` or ``no recommendation: why``."""
    rec, head = verdict.get("recommended"), verdict.get("headline")
    line = f"{'deploy ' + rec if rec else 'no recommendation'}: " + (f"{head} — " if rec not in (None, "baseline") and head else "")
    extra = [f"WARNING: {c}" for c in verdict.get("callouts") or []]
    return "; ".join([line + str(verdict.get("reason")), *extra, *([verdict["accuracy"]] if verdict.get("accuracy") else [])])


def status_data(run: RunFolder) -> dict:
    """Everything ``status`` shows, as data (docs/status.schema.json)."""
    config = run.config() or {}
    steps = []
    for step in run.plan() or []:
        outcome = run.json_object(step_file(step["kind"])) or {}  # a damaged one is named (one line, exit 2)
        steps.append({"kind": step["kind"], "lane": step["lane"], "status": outcome.get("status", "pending"),
                      "summary": outcome.get("summary", "")})
    trace: dict = {"events": None, "warning": None, "error": None}
    if run.trace_path.exists():
        try:
            read = count_events(run.trace_path)  # a count and what is wrong, streamed: no pydantic
            trace.update(events=read.events, warning=read.warning)
        except (TraceError, OSError) as err:
            trace["error"] = str(err)
    try:
        result, result_error = run.result, None
    except RunFolderError as err:  # damaged after the run wrote it: said in one line, the rest is shown
        result, result_error = None, str(err)
    return {"run": str(run.path), "goal": config.get("goal"), "result": result, "result_error": result_error,
            "steps": steps, "trace": trace}


def render_status(run: RunFolder) -> str:
    data = status_data(run)
    result = data["result"]
    lines = [f"run:    {printable(data['run'])}", f"goal:   {printable(data['goal'])}",
             f"result: {printable(result['status'])} — {printable(result.get('summary', ''))}" if result
             else f"result: unreadable: {printable(data['result_error'])}" if data["result_error"]
             else "result: (not finished)"]
    if result and result.get("next"):
        lines.append(f"next:   {printable(result['next'])}")
    if result and isinstance(result.get("verdict"), dict):
        lines.append(f"verdict: {printable(verdict_line(result['verdict']))}")
    if result and result.get("report"):
        lines.append(f"report: {printable(result['report'])}")
    if data["steps"]:
        rows = [[s["kind"], s["lane"], s["status"], s["summary"]] for s in data["steps"]]
        lines += ["", _table(rows, ["step", "lane", "status", "summary"], wrap_last=True)]
    trace = data["trace"]
    if trace["error"]:
        lines += ["", f"trace: unreadable: {printable(trace['error'])}"]
    elif trace["events"] is not None:
        lines += ["", f"trace: {trace['events']} events"]
        if trace["warning"]:
            lines.append(f"trace: {printable(trace['warning'])}")
    return "\n".join(lines)
