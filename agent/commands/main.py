"""The ``dsv4-agent`` command line, whole (agent/commands/cli.py answers the read-only questions before it).

``dsv4-agent "GOAL"`` runs a campaign; a first word that names a subcommand runs that instead.
The commands are plain functions in ``agent/commands/<area>.py``; this module only lists them,
in the order and under the headings ``--help`` shows. A first word that is close to a command
name but is no goal gets a suggestion instead of a campaign.
"""
from __future__ import annotations

from difflib import get_close_matches
from typing import Annotated

import typer

from agent import __version__
from agent.commands import campaign, config, mtp, replay, report, runs, tuning, upstream
from agent.commands.shared import CONTEXT, Command, Group, end_at_once_when_done, run_main
from agent.commands.typer_internals import UsageError

CAMPAIGN, INSPECT, PARTS = "Campaigns", "Runs", "Evidence and tools"
# (function, name, panel); the order is the order in --help
COMMANDS = [
    (campaign.run, "run", CAMPAIGN, campaign.RUN_HELP),
    (campaign.resume, "resume", CAMPAIGN, campaign.RESUME_HELP),
    (campaign.bundle, "bundle", CAMPAIGN, campaign.BUNDLE_HELP),
    (runs.status, "status", INSPECT, None),
    (runs.jobs, "jobs", INSPECT, None),
    (runs.runs, "runs", INSPECT, None),
    (report.report, "report", INSPECT, None),
    (report.compare, "compare", INSPECT, None),
    (replay.replay, "replay", INSPECT, None),
    (mtp.mtp, "mtp", PARTS, None),
    (upstream.sync, "sync", PARTS, None),
]


class GoalFirstGroup(Group):
    """Treat a first argument that is not a subcommand as the goal of a campaign (``run``)."""

    def _route(self, ctx, args: list[str]) -> list[str]:
        if not args or args[0] in self.commands or args[0].startswith("-") or ctx.resilient_parsing:
            return args
        word = args[0].strip()
        if " " not in word:
            close = get_close_matches(word.lower(), list(self.commands), n=3, cutoff=0.7)
            if close and not _is_a_goal(word):
                shown = " or ".join(repr(c) for c in close)
                raise UsageError(f"no command {word!r}; did you mean {shown}? A campaign goal is words the playbook "
                                 f"knows, e.g. dsv4-agent \"enable MTP\"", ctx=ctx)
        return ["run", *args]

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        return super().parse_args(ctx, self._route(ctx, args))

    def main(self, args=None, prog_name=None, **extra):
        run_main(super().main, args, prog_name, **extra)


def _is_a_goal(word: str) -> bool:
    from agent.campaign.playbook import understand

    return bool(understand(word)[0])


def _show_version(value: bool) -> None:
    if value:
        print(f"dsv4-agent {__version__}")
        raise typer.Exit(0)


app = typer.Typer(
    cls=GoalFirstGroup,
    help=(
        "Agentic optimization campaigns for SGLang deployments (DeepSeek-V4-Flash first).\n\n"
        'Run a campaign:  dsv4-agent "enable MTP and tune kernels"\n\n'
        "Without GPUs the GPU steps are planned, not run: the run ends 'planned' with the scripts "
        "written to runs/<id>/ for review and the exact command to run them on a GPU host. "
        "Exit codes: 0 done, 1 failed or refused, 2 bad input (see each command's --help)."
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings=CONTEXT,
)


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", "-V", is_eager=True, callback=_show_version,
                                                help="Print dsv4-agent's version and exit.")] = False) -> None:
    pass


for _fn, _name, _panel, _help in COMMANDS:
    app.command(_name, cls=Command, rich_help_panel=_panel, help=_help)(_fn)
app.add_typer(tuning.tuning, name="tuning", rich_help_panel=PARTS)
app.add_typer(config.config, name="config", rich_help_panel=PARTS)


def main() -> None:
    end_at_once_when_done()
    app()
