"""``status`` and ``runs``: look at a run, list the runs, remove old ones (answered without typer too:
agent/commands/quick.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

from agent.commands.params import JsonFlag, Opt, RunRef, RunsDir, fail, find_run, print_json
from agent.run.listing import clean_runs, list_runs, parse_age
from agent.run.status import render_runs, render_status, status_data
from agent.terminal.printable import echo


def status(run: RunRef, runs_dir: RunsDir = "runs", as_json: JsonFlag = False) -> None:
    """Show a run: its goal, result, verdict and report, and its plan steps with their full outcomes."""
    folder = find_run(run, runs_dir)
    if as_json:
        print_json(status_data(folder))
    else:
        echo(render_status(folder))


Clean = Annotated[bool, Opt("--clean", help="Remove finished runs older than --older-than.")]
OlderThan = Annotated[str, Opt("--older-than", metavar="AGE",
                                        help="Age for --clean: a number and s, m, h, d or w.")]
DryRun = Annotated[bool, Opt("--dry-run", help="With --clean: say what would be removed, remove nothing.")]


def runs(runs_dir: RunsDir = "runs", clean: Clean = False, older_than: OlderThan = "7d", dry_run: DryRun = False,
         as_json: JsonFlag = False) -> None:
    """List the runs (newest last) with their status; --clean removes old finished ones.

    A run being driven by an agent, or unfinished (no result.json), is never removed: it is listed
    as kept, with the reason.
    """
    folder = Path(runs_dir)
    if not folder.is_dir():
        fail(f"no runs folder {folder}; pass --runs-dir DIR")
    if not clean:
        entries = list_runs(folder)
        if as_json:
            print_json([e.data() for e in entries])
            return
        echo(render_runs(entries) if entries else f"no runs in {folder}")
        return
    try:
        age = parse_age(older_than)
    except ValueError as err:
        fail(str(err))
    removed, kept = clean_runs(folder, age, dry_run=dry_run)
    if as_json:
        print_json({"removed": [e.data() for e in removed], "kept": kept, "dry_run": dry_run})
        return
    verb = "would remove" if dry_run else "removed"
    for e in removed:
        echo(f"{verb} {e.name} ({e.status})")
    for k in kept:
        echo(f"kept {k['name']}: {k['why']}")
    echo(f"{verb} {len(removed)} run(s) older than {older_than}; kept {len(kept)}")
