"""``dsv4-agent replay RUN [--timeline] [--rerun]``."""
from __future__ import annotations

from typing import Annotated, Optional

from agent.exit_codes import ExitCode
from agent.campaign.start_resume import CampaignError, load_run
from agent.commands.params import Ended, JsonFlag, Opt, RunRef, fail, print_json
from agent.replay.driver import replay_run
from agent.replay.record import RecordError
from agent.replay.rerun import rerun, rerun_settings
from agent.replay.rerun_summary import summarize
from agent.report import timeline_process
from agent.terminal.printable import echo
from tools.base import ToolError

Timeline = Annotated[bool, Opt("--timeline", help="Show lanes, overlap, GPU idle, critical path.")]
Rerun = Annotated[bool, Opt("--rerun", help="Execute the recorded plan again in a new run folder.")]
Keep = Annotated[Optional[str], Opt("--keep", metavar="DIR", help="Keep the replayed run folder here.")]
RunsDir = Annotated[str, Opt("--runs-dir", metavar="DIR",
                                      help="Folder holding run folders (new runs of --rerun go here).")]
Tolerance = Annotated[float, Opt("--tolerance", metavar="PCT", min=0,
                                          help="--rerun: a metric change up to this many percent is noise.")]
Raw = Annotated[bool, Opt("--raw", help="--rerun: also print the raw field-by-field diff.")]


def replay(run: RunRef, timeline: Timeline = False, rerun: Rerun = False, keep: Keep = None,
           runs_dir: RunsDir = "runs", tolerance: Tolerance = 5.0, raw: Raw = False, as_json: JsonFlag = False) -> None:
    """Replay a recorded campaign offline and check every decision against the record.

    The same goal and settings are re-driven with step outcomes and LLM answers served from
    trace.jsonl (no GPU, network, model or job); the first difference is shown with its event
    number, expected vs got. Exit 0 reproduced, 1 diverged, 2 unreadable, 4 the record is cut
    short (reproduced up to its last good event). --timeline draws the run (terminal,
    RUN/timeline.png, a Timeline section in RUN/report.html). --rerun runs the recorded plan
    again for real into a new run folder and prints a summary of what changed: per metric old, new,
    change % and whether it is within noise (--tolerance), then the recommended flags and tuned
    shapes; --raw adds the field-by-field diff.
    """
    try:
        folder = load_run(run, runs_dir)
    except CampaignError as err:
        fail(str(err), ExitCode.USAGE)
    if timeline and (link := folder.placed_link()):  # the timeline and the report are written here
        fail(link, ExitCode.USAGE)
    out: dict = {"run": str(folder.path)}
    try:  # a re-run's settings are checked before anything is replayed or run (agent/settings/of_run.py)
        again = rerun_settings(folder.path, runs_dir) if rerun else None
    except (CampaignError, RecordError) as err:
        fail(str(err), ExitCode.USAGE)
    drawing = timeline_process.start(folder.path) if timeline else None  # drawn beside the replay
    try:
        code = _replay(folder.path, keep, out, as_json)
        if drawing is not None:
            _timeline(folder.path, drawing, out, as_json)
        if rerun:
            code = max(code, _rerun(folder.path, *again, out, as_json, tolerance, raw))
    except (RecordError, ToolError, CampaignError) as err:
        fail(str(err), ExitCode.USAGE)
    finally:
        if drawing is not None and drawing.poll() is None:  # the replay failed first: ours to end
            drawing.kill()
            drawing.wait()
    if as_json:
        print_json({**out, "exit_code": code})
    raise Ended(code)


def _say(text: str, as_json: bool) -> None:
    if not as_json:
        echo(text)


def _replay(path, keep, out: dict, as_json: bool) -> int:
    report = replay_run(path, work_dir=keep)
    out["replay"] = {"exit_code": report.exit_code, "matched": report.matched, "total": report.total,
                     "events": report.events, "stopped": report.stopped, "plan_same": report.plan_same,
                     "uses_llm": report.uses_llm, "notes": report.notes, "text": report.render(),
                     "divergence": report.divergence.describe() if report.divergence is not None else None,
                     "search": report.search.model_dump() if report.search is not None else None}
    _say(out["replay"]["text"], as_json)
    return report.exit_code


def _timeline(path, drawing, out: dict, as_json: bool) -> None:
    png, text = timeline_process.finish(drawing)
    out["timeline"] = {"text": text.rstrip(), "png": str(png), "html": str(path / "report.html")}
    _say(text.rstrip(), as_json)
    _say(f"wrote {png} and the Timeline section of {path / 'report.html'}", as_json)


def _rerun(path, goal: str, settings, out: dict, as_json: bool, tolerance: float, raw: bool) -> int:
    code, new, diff = rerun(path, goal, settings)
    summary = summarize(path, new, tolerance)
    out["rerun"] = {"exit_code": code, "new_run": str(new), "summary": summary.model_dump(), "diff": diff}
    _say(f"re-run of {path.name} → {new}", as_json)
    _say(summary.render(), as_json)
    changed = sum(line.startswith(("  ~", "  +", "  -")) for line in diff.splitlines())
    _say(diff if raw else f"raw diff: {changed} field(s) differ (--raw shows them)", as_json)
    return code
