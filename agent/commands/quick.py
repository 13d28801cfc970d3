"""Answers to the questions that only read, imported by the console script before anything else.

``--version``, every ``--help`` and the commands that look at runs (``status RUN``, ``runs``, ``jobs RUN``;
agent/commands/command_table.py's ``WITHOUT_TYPER``) are asked far more often than campaigns run, and
importing the command-line framework costs more than answering them. Such a command's words are parsed
from the parameters its function declares (agent/commands/params.py) and the same function answers;
anything this parser does not read as click would (a number, an unknown option) returns None and
agent/commands/main.py answers. A help is the whole command line's own text, cached per command,
terminal width and version of our sources and installed packages.
"""
from __future__ import annotations

import os
import sys

from agent import __version__
from agent.exit_codes import ExitCode

PROG = "dsv4-agent"
COMPLETION_ENV = "_DSV4_AGENT_COMPLETE"  # typer's shell completion asks through the environment


def answer(argv: list[str]) -> int | None:
    """The exit status once answered here; None when the whole command line must answer."""
    if COMPLETION_ENV in os.environ:
        return None
    try:
        if argv in (["--version"], ["-V"]):
            print(f"{PROG} {__version__}", flush=True)
            return 0
        from agent.commands.command_table import HELP_PATHS, WITHOUT_TYPER  # what --version needs not

        if argv and argv[-1] in ("-h", "--help") and tuple(argv[:-1]) in HELP_PATHS:
            sys.stdout.write(tool_help(tuple(argv[:-1])))
            sys.stdout.flush()
            return 0
        return without_typer(argv) if tuple(argv[:1]) in WITHOUT_TYPER else None
    except BrokenPipeError:  # the reader of stdout went away (| head): later writes go nowhere
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.PIPE_CLOSED
    except OSError as err:  # a FIFO, link or unwritable file where a run file is expected: one line
        from tools.json_data import file_refusal

        if (said := file_refusal(err)) is None:
            raise
        from agent.terminal.printable import printable

        print(f"{PROG}: {printable(said)}", file=sys.stderr, flush=True)
        return ExitCode.FAILED
    except RecursionError:  # as the whole command line says it (agent/commands/shared.py)
        from tools.json_data import TooDeep

        print(f"{PROG}: {TooDeep().describe()}", file=sys.stderr, flush=True)
        return ExitCode.USAGE
    except ValueError as err:
        from tools.json_data import TooDeep

        if not isinstance(err, TooDeep):
            raise
        from agent.terminal.printable import printable

        print(f"{PROG}: {printable(err.describe())}", file=sys.stderr, flush=True)
        return ExitCode.USAGE


def without_typer(argv: list[str]) -> int | None:
    """A command answered by its own function, its words read from its parameters."""
    from agent.commands.command_table import command_function
    from agent.commands.params import Ended, declared
    from agent.run.run_files import RunFolderError

    command = command_function(tuple(argv[:1]))
    given = parse(argv[1:], declared(command))
    if given is None:
        return None
    try:
        command(**given)
    except Ended as ended:  # its reason said already (params.fail)
        return ended.code
    except RunFolderError as err:  # a damaged run file: one line naming it (agent/run/run_files.py)
        from agent.terminal.printable import printable

        print(f"{PROG}: {printable(str(err))}", file=sys.stderr, flush=True)
        return ExitCode.USAGE
    except KeyboardInterrupt:  # as click says it for the whole command line (agent/commands/shared.py)
        print("\ninterrupted", file=sys.stderr, flush=True)
        return ExitCode.INTERRUPTED
    sys.stdout.flush()
    return 0


def _readable(kind, mark) -> bool:
    """An option this parser reads as click does: a flag, a text, or a repeated text, with no callback."""
    plain = not ({"callback", "is_eager", "min", "max"} & set(mark.kwargs)) and not any("/" in d for d in mark.decls)
    return plain and (kind in (bool, str) or kind == list[str])


def parse(args: list[str], params: list) -> dict | None:
    """The command's keyword arguments as click would read ``args``, or None for anything else."""
    from agent.commands.params import Arg, Opt

    options = {decl: (param.name, kind) for param, kind, mark in params if isinstance(mark, Opt)
               and _readable(kind, mark) for decl in mark.decls}
    arguments = [param for param, _kind, mark in params if isinstance(mark, Arg)]
    given: dict = {}
    pos: list[str] = []
    at = 0
    while at < len(args):
        word = args[at]
        if word == "--":
            pos += args[at + 1:]
            break
        if word.startswith("-") and word != "-":
            flag, eq, value = word.partition("=")
            if flag not in options:
                return None
            name, kind = options[flag]
            if kind is bool:
                if eq:
                    return None
                given[name] = True
                at += 1
                continue
            if not eq:
                at += 1
                if at == len(args):
                    return None
                value = args[at]
            if kind is str:
                given[name] = value
            else:
                given.setdefault(name, []).append(value)
        else:
            pos.append(word)
        at += 1
    required = sum(1 for param in arguments if param.default is param.empty)
    if not required <= len(pos) <= len(arguments):
        return None
    return {**given, **{param.name: word for param, word in zip(arguments, pos, strict=False)}}


def tool_help(path: tuple[str, ...] = ()) -> str:
    """``dsv4-agent [COMMAND...] -h`` as the whole command line prints it, from the cache when it holds it."""
    import hashlib
    import shutil
    from pathlib import Path

    sources = help_sources()
    stamp = [__version__, sys.version, str(shutil.get_terminal_size().columns), *path]
    installed = [Path(p) for p in sys.path if p.endswith(("site-packages", "dist-packages"))]  # typer's version
    for source in [*sources, *installed]:
        try:
            info = os.stat(source)
        except OSError:
            continue
        stamp.append(f"{source}:{info.st_mtime_ns}:{info.st_size}")
    cache = Path(os.environ.get("DSV4_CACHE_DIR") or Path.home() / ".cache" / "dsv4-agent") / "help"
    kept = cache / f"{hashlib.sha256(chr(0).join(stamp).encode()).hexdigest()[:32]}.txt"
    try:
        return kept.read_text()
    except OSError:
        pass
    text = _render_help(path)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        fresh = kept.with_suffix(f".{os.getpid()}.tmp")
        fresh.write_text(text)
        os.replace(fresh, kept)
    except OSError:
        pass  # no cache here: the next -h renders it again
    return text


def help_sources() -> list[str]:
    """Every source of agent/ and tools/: a command's module is imported to render its help, with what it imports."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return sorted(os.path.join(folder, name) for package in ("agent", "tools")
                  for folder, _subs, names in os.walk(os.path.join(root, package)) for name in names
                  if name.endswith(".py"))


def _render_help(path: tuple[str, ...] = ()) -> str:
    """What click's help option of that command prints: its help and a newline."""
    from contextlib import ExitStack

    import typer

    from agent.commands.main import app

    command = typer.main.get_command(app)
    with ExitStack() as contexts:
        ctx = contexts.enter_context(command.make_context(PROG, [], resilient_parsing=True))
        for word in path:
            command = command.get_command(ctx, word)
            ctx = contexts.enter_context(command.make_context(word, [], parent=ctx, resilient_parsing=True))
        return ctx.get_help() + "\n"
