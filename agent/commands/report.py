"""``dsv4-agent report RUN``: rebuild report.md, report.html and the plots from the run folder."""
from __future__ import annotations

from agent.commands.base import JsonFlag, RunRef, RunsDir, fail, print_json
from agent.terminal import echo


def report(run: RunRef, runs_dir: RunsDir = "runs", as_json: JsonFlag = False) -> None:
    """Rebuild the comparison report of a run from its folder alone (bench/, steps/, plan.md)."""
    from agent.report.build import build_report
    from agent.report.timeline_view import timeline_sections
    from agent.runfolder import RunFolder, RunFolderError

    try:
        folder = RunFolder.find(run, runs_dir)
    except RunFolderError as err:
        fail(str(err))
    try:
        _ = folder.result
    except RunFolderError as err:  # the report is built without it (its date comes from config.json)
        echo(f"note: {err}", err=True)
    written = [str(p) for p in build_report(folder.path, extra_sections=timeline_sections(folder.path))]
    if as_json:
        print_json({"run": str(folder.path), "written": written})
    else:
        echo("\n".join(written))
