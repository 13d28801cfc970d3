"""``dsv4-agent replay RUN [--timeline] [--rerun]``."""
from __future__ import annotations

from typing import Optional

import typer

EXIT_UNREADABLE = 2


def register(app: typer.Typer) -> None:
    @app.command(help=(
        "Replay a recorded campaign offline: the same goal and settings are re-driven with step outcomes and "
        "LLM answers served from trace.jsonl (no GPU, network, model or job), and every decision is checked "
        "against the record; the first difference is shown with its event number, expected vs got. "
        "Exit 0 reproduced, 1 diverged, 3 the record is cut short (reproduced up to its last good event). "
        "--timeline draws the run (terminal, RUN/timeline.png, a Timeline section in RUN/report.html). "
        "--rerun runs the recorded plan again for real into a new run folder and prints what changed."))
    def replay(
        run: str = typer.Argument(..., help="Run folder, its name under --runs-dir, or 'latest'."),
        timeline: bool = typer.Option(False, "--timeline", help="Show lanes, overlap, GPU idle, critical path."),
        rerun: bool = typer.Option(False, "--rerun", help="Execute the recorded plan again in a new run folder."),
        keep: Optional[str] = typer.Option(None, "--keep", help="Keep the replayed run folder under this dir."),
        runs_dir: str = typer.Option("runs", help="Folder holding run folders (new runs of --rerun go here)."),
    ) -> None:
        from agent.campaign import CampaignError, load_run
        from agent.replay.record import RecordError

        try:
            folder = load_run(run, runs_dir)
        except CampaignError as err:
            typer.echo(f"dsv4-agent: {err}", err=True)
            raise typer.Exit(EXIT_UNREADABLE)
        try:
            code = _replay(folder.path, keep)
            if timeline:
                _timeline(folder.path)
            if rerun:
                code = max(code, _rerun(folder.path, runs_dir))
        except RecordError as err:
            typer.echo(f"dsv4-agent: {err}", err=True)
            raise typer.Exit(EXIT_UNREADABLE)
        raise typer.Exit(code)


def _replay(path, keep) -> int:
    from agent.replay.driver import replay_run

    report = replay_run(path, work_dir=keep)
    typer.echo(report.render())
    return report.exit_code


def _timeline(path) -> None:
    from agent.report.timeline_view import publish

    _tl, png, text = publish(path)
    typer.echo(text.rstrip())
    typer.echo(f"wrote {png} and the Timeline section of {path / 'report.html'}")


def _rerun(path, runs_dir: str) -> int:
    from agent.replay.rerun import rerun

    code, new, diff = rerun(path, runs_dir)
    typer.echo(f"re-run of {path.name} → {new}")
    typer.echo(diff)
    return code
