"""``dsv4-agent report RUN``: rebuild report.md, report.html and the plots from the run folder."""
from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report(
        run: str = typer.Argument(..., help="Run folder path, its name under --runs-dir, or 'latest'"),
        runs_dir: str = typer.Option("runs", "--runs-dir", help="Where run folders live"),
    ) -> None:
        """Rebuild the comparison report of a run from its folder alone (bench/, steps/, plan.md)."""
        from agent.report.build import build_report
        from agent.report.sections import campaign_sections
        from agent.runfolder import RunFolder, RunFolderError

        try:
            folder = RunFolder.find(run, runs_dir)
        except RunFolderError as err:
            typer.echo(f"dsv4-agent: {err}", err=True)
            raise typer.Exit(2) from None
        for path in build_report(folder.path, extra_sections=campaign_sections(folder.path)):
            typer.echo(str(path))
