"""The ``dsv4-agent`` command line, whole (agent/commands/cli.py answers the read-only questions before it).

``dsv4-agent "GOAL"`` runs a campaign; a first word that names a subcommand runs that instead.
The commands are plain functions in ``agent/commands/<area>.py``, listed with their headings in
agent/commands/command_table.py; a command is built, and its module imported, only when it is looked up
(run, or listed in a help). A first word that is close to a command name but is no goal gets a
suggestion instead of a campaign.
"""
from __future__ import annotations

import inspect
from difflib import get_close_matches
from typing import Annotated, get_args, get_origin

import typer

from agent import __version__
from agent.commands.command_table import COMMANDS, GROUPS, command_function, group_help
from agent.commands.params import Arg, Opt
from agent.commands.shared import CONTEXT, Command, Group, end_at_once_when_done, run_main, sub_app
from agent.commands.typer_internals import UsageError


def _typer_mark(mark):
    if isinstance(mark, Opt):
        return typer.Option(*mark.decls, **mark.kwargs)
    if isinstance(mark, Arg):
        return typer.Argument(**mark.kwargs)
    return mark


def typer_callback(fn):
    """``fn`` as typer reads a command: the same parameters, their Opt and Arg turned into typer's own."""
    def command(**given):
        return fn(**given)

    params = []
    for param in inspect.signature(fn, eval_str=True).parameters.values():
        if get_origin(param.annotation) is Annotated:
            base, *marks = get_args(param.annotation)
            param = param.replace(annotation=Annotated[(base, *map(_typer_mark, marks))])
        params.append(param)
    command.__signature__ = inspect.Signature(params)
    command.__name__, command.__doc__, command.__module__ = fn.__name__, fn.__doc__, fn.__module__
    return command


def build(words: tuple[str, ...]):
    """The click command (or group) for one entry of the table, its module imported now."""
    holder = typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False)  # as the root app
    panel = next(p for w, _t, p in COMMANDS if w == words)
    if words in GROUPS:
        group = sub_app(group_help(words))
        for sub, _target, _panel in COMMANDS:
            if sub[:-1] == words:
                group.command(sub[-1], cls=Command)(typer_callback(command_function(sub)))
        holder.add_typer(group, name=words[-1], rich_help_panel=panel)
    else:
        holder.command(words[-1], cls=Command, rich_help_panel=panel)(typer_callback(command_function(words)))
    return typer.main.get_group(holder).commands[words[-1]]


TOP = [words[0] for words, _t, _p in COMMANDS if len(words) == 1]


class GoalFirstGroup(Group):
    """The commands of the table, each built when looked up; a first argument that is not one is the
    goal of a campaign (``run``)."""

    def list_commands(self, ctx) -> list[str]:
        return TOP

    def get_command(self, ctx, name: str):
        if name not in self.commands and name in TOP:
            self.commands[name] = build((name,))
        return self.commands.get(name)

    def _route(self, ctx, args: list[str]) -> list[str]:
        if not args or args[0] in TOP or args[0].startswith("-") or ctx.resilient_parsing:
            return args
        word = args[0].strip()
        if " " not in word:
            close = get_close_matches(word.lower(), TOP, n=3, cutoff=0.7)
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


def main() -> None:
    end_at_once_when_done()
    app()
