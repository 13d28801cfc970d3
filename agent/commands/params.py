"""What a command declares and uses without the command-line framework: its options and arguments,
the one error helper, the run RUN names, and JSON output.

A command's parameters are ``Annotated[type, Opt(...)]`` or ``Annotated[type, Arg(...)]``: typer's
``Option``/``Argument`` arguments, kept as given. agent/commands/main.py hands them to typer when it
builds a command; agent/commands/quick.py reads the same parameters to answer ``status``, ``runs``
and ``jobs`` without typer, calling the same function. So an option is declared once, on the function.
"""
from __future__ import annotations

import inspect
import json
import sys
from typing import Annotated, Any, NoReturn, Union, get_args, get_origin

from agent.exit_codes import ExitCode
from agent.run.folder import RunFolder, RunFolderError

PROG = "dsv4-agent"


class Opt:
    """An option: typer.Option's names and keyword arguments (``help``, ``metavar``, ``min``...)."""

    def __init__(self, *decls: str, **kwargs: Any):
        self.decls, self.kwargs = decls, kwargs


class Arg:
    """A positional argument: typer.Argument's keyword arguments."""

    def __init__(self, **kwargs: Any):
        self.kwargs = kwargs


class Ended(RuntimeError):
    """A command ends with this exit status, its reason already said (``fail``)."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


def fail(message: str, code: int = ExitCode.USAGE) -> NoReturn:
    """End the command with one line on stderr: ``dsv4-agent: <what is wrong and the fix>``."""
    from agent.secrets import redact_text
    from agent.terminal.printable import printable

    print(f"{PROG}: {printable(redact_text(message))}", file=sys.stderr, flush=True)  # quotes run folders, repos
    raise Ended(code)


def find_run(run: str, runs_dir: str) -> RunFolder:
    """The run folder RUN names (a path, a name under --runs-dir, or 'latest'), or the command ends saying why."""
    try:
        return RunFolder.find(run, runs_dir)
    except RunFolderError as err:
        fail(str(err))


def print_json(data: Any) -> None:
    """Machine-readable output on stdout (documented by a schema under docs/)."""
    print(json.dumps(data, indent=2, sort_keys=False, default=str), flush=True)


def complete_run(ctx, incomplete: str) -> list[str]:
    """Shell completion of RUN: 'latest' and the run folders' names under --runs-dir (newest first)."""
    from pathlib import Path

    folder = Path(ctx.params.get("runs_dir") or "runs")
    try:
        names = sorted((p.name for p in folder.iterdir() if p.is_dir()), reverse=True)
    except OSError:
        names = []
    return [name for name in ["latest", *names] if name.startswith(incomplete)]


# Arguments and options several commands share.
RunRef = Annotated[str, Arg(metavar="RUN", help="Run folder path, its name under --runs-dir, or 'latest'.",
                            autocompletion=complete_run)]
RunsDir = Annotated[str, Opt("--runs-dir", metavar="DIR", help="Folder holding run folders.")]
JsonFlag = Annotated[bool, Opt("--json", help="Print the result as JSON (schema in docs/).")]


def declared(fn) -> list[tuple[inspect.Parameter, type, Opt | Arg | None]]:
    """Each parameter of a command with its type (``Optional`` taken off) and its Opt or Arg."""
    found = []
    for param in inspect.signature(fn, eval_str=True).parameters.values():
        kind, marks = param.annotation, ()
        if get_origin(kind) is Annotated:
            kind, *marks = get_args(kind)
        if get_origin(kind) is Union and type(None) in get_args(kind):
            kind = next(a for a in get_args(kind) if a is not type(None))
        found.append((param, kind, next((m for m in marks if isinstance(m, (Opt, Arg))), None)))
    return found
