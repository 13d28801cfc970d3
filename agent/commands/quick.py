"""Answers to the questions that only read, imported by the console script before anything else.

``--version``, every ``--help``, ``status RUN``, ``runs`` and listing ``jobs RUN`` are asked far
more often than campaigns run, and importing the command-line framework costs more than answering
them. The forms in ``HELP_PATHS`` and ``READERS`` are parsed by hand; anything else returns None and
agent/commands/main.py answers with the same output (tests/test_quick.py holds them equal). A help
is the whole command line's own text, cached per command, terminal width and version of the
sources it is rendered from and installed packages.
"""
from __future__ import annotations

import os
import sys

from agent import __version__
from agent.exit_codes import ExitCode

PROG = "dsv4-agent"
COMPLETION_ENV = "_DSV4_AGENT_COMPLETE"  # typer's shell completion asks through the environment


class Refused(Exception):
    def __init__(self, message: str, code: int = ExitCode.USAGE):
        super().__init__(message)
        self.code = code


def answer(argv: list[str]) -> int | None:
    """The exit status once answered here; None when the whole command line must answer."""
    if COMPLETION_ENV in os.environ:
        return None
    try:
        if argv in (["--version"], ["-V"]):
            print(f"{PROG} {__version__}", flush=True)
            return 0
        if argv and argv[-1] in ("-h", "--help") and tuple(argv[:-1]) in HELP_PATHS:
            sys.stdout.write(tool_help(tuple(argv[:-1])))
            sys.stdout.flush()
            return 0
        reader = READERS.get(argv[0]) if argv else None
        if reader is None:
            return None
        flags, valued, repeated, positionals, run = reader
        parsed = parse(argv[1:], flags, valued, repeated, positionals)
        if parsed is None:
            return None
        run(*parsed)
        sys.stdout.flush()
        return 0
    except Refused as err:
        from agent.secrets import redact_text
        from agent.terminal.printable import printable

        print(f"{PROG}: {printable(redact_text(str(err)))}", file=sys.stderr, flush=True)
        return err.code
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


def parse(args: list[str], flags: set[str], valued: set[str], repeated: set[str],
          positionals: int) -> tuple[list[str], dict] | None:
    """Positionals and options as click would read them, or None for anything else."""
    pos: list[str] = []
    opts: dict = {}
    at = 0
    while at < len(args):
        word = args[at]
        if word == "--":
            pos += args[at + 1:]
            break
        if word.startswith("-") and word != "-":
            name, eq, value = word.partition("=")
            if name in flags and not eq:
                opts[name] = True
            elif name in valued | repeated:
                if not eq:
                    at += 1
                    if at == len(args):
                        return None
                    value = args[at]
                if name in repeated:
                    opts.setdefault(name, []).append(value)
                else:
                    opts[name] = value
            else:
                return None
        else:
            pos.append(word)
        at += 1
    return (pos, opts) if len(pos) == positionals else None


def _print_json(data) -> None:
    import json

    print(json.dumps(data, indent=2, sort_keys=False, default=str), flush=True)


def _find(run: str, runs_dir: str):
    from agent.run.folder import RunFolder, RunFolderError

    try:
        return RunFolder.find(run, runs_dir)
    except RunFolderError as err:
        raise Refused(str(err)) from None


def _status(pos: list[str], opts: dict) -> None:
    from agent.run.status import render_status, status_data
    from agent.terminal.printable import echo

    from agent.run.run_files import RunFolderError

    folder = _find(pos[0], opts.get("--runs-dir", "runs"))
    try:
        said = status_data(folder) if opts.get("--json") else render_status(folder)
    except RunFolderError as err:  # a damaged run file: one line naming it (agent/run/run_files.py)
        raise Refused(str(err)) from None
    if opts.get("--json"):
        _print_json(said)
    else:
        echo(said)


def _runs(_pos: list[str], opts: dict) -> None:
    from pathlib import Path

    from agent.run.listing import list_runs
    from agent.run.status import render_runs
    from agent.terminal.printable import echo

    folder = Path(opts.get("--runs-dir", "runs"))
    if not folder.is_dir():
        raise Refused(f"no runs folder {folder}; pass --runs-dir DIR")
    entries = list_runs(folder)
    if opts.get("--json"):
        _print_json([e.data() for e in entries])
        return
    echo(render_runs(entries) if entries else f"no runs in {folder}")


def _jobs(pos: list[str], opts: dict) -> None:
    from agent.settings.recorded import CampaignError
    from agent.run.status import jobs_data, render_jobs
    from agent.terminal.printable import echo
    from tools.base import ToolError

    from agent.run.run_files import RunFolderError

    folder = _find(pos[0], opts.get("--runs-dir", "runs"))
    try:
        recorded = (folder.config() or {}).get("settings") or {}
    except RunFolderError as err:  # a damaged config.json: one line naming it (agent/run/run_files.py)
        raise Refused(str(err)) from None
    try:
        if _local_ledger(recorded, folder.jobs_dir) and opts.get("--executor") is None:
            from tools.jobs.ledger.listing import local_jobs

            found = local_jobs(folder.jobs_dir)
        else:  # a host or controller is contacted: resume's rule for the folder's (agent/settings/run_reach.py)
            from agent.settings.run_reach import reach_of_run
            from agent.terminal.printable import outage_wait
            from tools.jobs.factory import make_executor

            executor, options = reach_of_run(folder.path, opts.get("--executor"), opts.get("--ssh-option"))
            found = make_executor(executor, folder.jobs_dir, ssh_options=options, outage=outage_wait()).jobs()
    except (ToolError, CampaignError) as err:
        raise Refused(str(err)) from None
    if opts.get("--json"):
        _print_json(jobs_data(found))
    else:
        echo(render_jobs(found))


def _local_ledger(recorded: dict, jobs_root) -> bool:
    """Whether the run's jobs are LocalExecutor's and no other executor has claimed the ledger, so that
    ``make_executor`` would answer with a LocalExecutor and change nothing (tools/jobs/factory.py)."""
    executor = recorded.get("executor", "local")
    return isinstance(executor, str) and executor.strip() == "local" and not (jobs_root / "executor.json").exists()


# command: (flags, options with a value, repeatable options, positionals, answer)
READERS = {
    "status": ({"--json"}, {"--runs-dir"}, set(), 1, _status),
    "runs": ({"--json"}, {"--runs-dir"}, set(), 0, _runs),
    "jobs": ({"--json"}, {"--runs-dir", "--executor"}, {"--ssh-option"}, 1, _jobs),
}


# Every command whose help is answered here (agent/commands/main.py's tree; tests/test_quick.py holds them equal)
HELP_PATHS = frozenset({(), ("run",), ("resume",), ("bundle",), ("status",), ("jobs",), ("runs",), ("report",),
                        ("compare",), ("replay",), ("mtp",), ("sync",), ("tuning",), ("tuning", "plan"),
                        ("tuning", "shapes"), ("tuning", "prove"), ("tuning", "uninstall"), ("config",),
                        ("config", "allow"), ("config", "deny")})
# What else a help is rendered from, beside agent/commands/cli.py and agent/commands/ (tests/test_quick.py checks
# that rendering every help imports nothing else of agent/ or tools/)
HELP_SOURCES = ("../secrets.py", "../exit_codes.py", "../terminal/__init__.py", "../terminal/printable.py",
                "../campaign/__init__.py", "../campaign/preload.py", "../../tools/json_data.py",
                "../../tools/defaults.py")


def tool_help(path: tuple[str, ...] = ()) -> str:
    """``dsv4-agent [COMMAND...] -h`` as the whole command line prints it, from the cache when it holds it."""
    import hashlib
    import shutil
    from pathlib import Path

    here = Path(__file__).resolve().parent
    sources = [*sorted(here.glob("*.py")), *(here / s for s in HELP_SOURCES)]
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
