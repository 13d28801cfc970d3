"""The ``dsv4-agent`` command line.

``dsv4-agent "GOAL"`` runs a campaign; every other word before the goal is a subcommand.
Subcommands live in ``agent/commands/<name>.py``, each exposing ``register(app)``; modules
import their heavy dependencies inside the command bodies so that ``--help`` stays fast.
"""
from __future__ import annotations

import importlib
import sys

import click
import typer
from typer.core import TyperGroup

# Order is the order in --help. Each module adds its commands with register(app).
COMMAND_MODULES = [
    "agent.commands.campaign",
    "agent.commands.mtp",
    "agent.commands.sync",
    "agent.commands.report",
    "agent.commands.tuning",
    "agent.commands.replay",
]


class GoalFirstGroup(TyperGroup):
    """Treat a first argument that is not a subcommand as the goal of a campaign (``run``)."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args.insert(0, "run")
        return super().resolve_command(ctx, args)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=GoalFirstGroup,
    help=(
        "Agentic optimization campaigns for SGLang deployments (DeepSeek-V4-Flash first).\n\n"
        'Run a campaign:  dsv4-agent "enable MTP and tune kernels"\n\n'
        "Without GPUs the GPU steps are planned, not run: the run ends 'planned' with the scripts "
        "written to runs/<id>/ for review and the exact command to run them on a GPU host."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
