"""``dsv4-agent report RUN``: rebuild report.md, report.html and the plots from the run folder."""
from __future__ import annotations

from typing import Annotated, Optional

from agent.commands.params import Arg, JsonFlag, Opt, RunRef, RunsDir, fail, find_run, print_json
from agent.report.build import build_report
from agent.report.compare import compare_runs, compare_section, render_text
from agent.report.timeline_view import timeline_sections
from agent.run.folder import RunFolderError
from agent.terminal.printable import echo

CompareWith = Annotated[Optional[str], Opt(
    "--compare", metavar="RUN", help="Add a section setting this run beside another (its settings, evidence, flags "
                                     "and measured points, this run / RUN).")]


def report(run: RunRef, runs_dir: RunsDir = "runs", compare: CompareWith = None, as_json: JsonFlag = False) -> None:
    """Rebuild the comparison report of a run from its folder alone (bench/, steps/, plan.md).

    Example: dsv4-agent report latest --compare runs/20260101T000000Z-enable-mtp"""
    folder = find_run(run, runs_dir)
    if link := folder.placed_link():  # report.md, report.html and the plots are written here
        fail(link)
    other = find_run(compare, runs_dir) if compare else None
    try:
        _ = folder.result
    except RunFolderError as err:  # the report is built without it (its date comes from config.json)
        echo(f"note: {err}", err=True)
    extra = timeline_sections(folder.path)
    if other is not None:
        extra = [compare_section(other.path, folder.path), *extra]
    written = [str(p) for p in build_report(folder.path, extra_sections=extra)]
    if as_json:
        print_json({"run": str(folder.path), "written": written})
    else:
        echo("\n".join(written))


RunA = Annotated[str, Arg(metavar="RUN_A", help="The run to read against: path, name under --runs-dir, "
                                                            "or 'latest'.")]
RunB = Annotated[str, Arg(metavar="RUN_B", help="The run read against it (B / A).")]


def compare(run_a: RunA, run_b: RunB, runs_dir: RunsDir = "runs", as_json: JsonFlag = False) -> None:
    """Two runs side by side: where each ran, the settings that differ, the MTP evidence, each variant's
    flags where they differ (with the evidence each run cites), the measured points (B / A per variant
    and concurrency, with the spread of the repeats) and the two verdicts.

    Example: dsv4-agent compare runs/<before-the-pull> latest"""
    a, b = find_run(run_a, runs_dir), find_run(run_b, runs_dir)
    data = compare_runs(a.path, b.path)
    if as_json:
        print_json(data)
    else:
        echo(render_text(data))
