"""What every command shares under typer: help that is grouped, and errors turned into one line and an exit code.

Exit codes of every command: 0 done, 1 the work failed or was refused (the message says why),
2 bad input (usage errors: a wrong option, a run that does not exist, a bad setting). The error
helper and JSON output, which need no typer, are agent/commands/params.py's.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
from typing import NoReturn

import typer
from typer import Abort
from typer.core import TyperCommand, TyperGroup

from agent.exit_codes import ExitCode
from agent.commands.examples import format_examples
from agent.commands.params import PROG, Ended
from agent.run.run_files import RunFolderError
from agent.commands.typer_internals import ClickException, NoArgsIsHelpError, UsageError, plain_bool_flags
from agent.terminal.printable import printable
from tools.json_data import TooDeep, file_refusal

DEFAULT_PANEL = "Options"


_END_AT_ONCE = False  # set by the console script (agent.commands.main.main); tests' in-process runs keep it off


def end_at_once_when_done() -> None:
    global _END_AT_ONCE
    _END_AT_ONCE = True


def end_when_written(code: int) -> NoReturn:
    """End a command whose results are all written (a campaign's ``result.json`` is fsync'd).

    From the console script the process ends right here (``os._exit`` after flushing stdout and
    stderr): nothing is left to do, while tearing the interpreter down (collecting a parse cache's
    millions of objects, unloading modules) takes seconds. In process (tests) it raises
    ``Ended`` like any command. The one way for any command to skip that teardown.
    """
    if _END_AT_ONCE:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BrokenPipeError, ValueError):  # the reader went away, or the stream is closed
                stream.flush()
        os._exit(code)
    raise Ended(code)


def _argument_name(param) -> str:
    return param.metavar or param.name.upper()


def _help_record(param, ctx) -> tuple[str, str] | None:
    """Typer's record, with the argument named by its metavar alone and ranges in words."""
    record = param.get_help_record(ctx)
    if record is None:
        return None
    name, text = record
    if param.param_type_name == "argument":
        name = _argument_name(param)
    return name, _RANGE.sub(lambda m: f"at least {m.group(1)}", text)


_RANGE = re.compile(r"x>=(\d+)")


def _usage_pieces(command, ctx) -> list[str]:
    pieces = [command.options_metavar] if command.options_metavar else []
    for param in command.get_params(ctx):
        if param.param_type_name == "argument":
            name = _argument_name(param) + ("..." if param.nargs != 1 else "")
            pieces.append(name if param.required else f"[{name}]")
    return pieces


def _format_panels(command, ctx, formatter) -> None:
    """Arguments, then options grouped under their ``rich_help_panel`` headings, in first-seen order."""
    sections: dict[str, list[tuple[str, str]]] = {}
    for param in command.get_params(ctx):
        record = _help_record(param, ctx)
        if record is None:
            continue
        title = "Arguments" if param.param_type_name == "argument" else (
            getattr(param, "rich_help_panel", None) or DEFAULT_PANEL)
        sections.setdefault(title, []).append(record)
    ordered = sorted(sections, key=lambda t: (t != "Arguments", t == DEFAULT_PANEL))
    for title in ordered:
        with formatter.section(title):
            formatter.write_dl(sections[title])


# Options a command once spelled otherwise (one meaning per name: --gpus is GPU indices, a count is
# --gpu-count). The old spelling gets a "did you mean" and exit 2, never a guess at what it meant.
RENAMED_OPTIONS: dict[str, dict[str, str]] = {
    "mtp": {"--gpus": "--gpu-count", "--version": "--sglang-version"},
    "tuning plan": {"--gpus": "--gpu-count", "--shape": "--shapes"},
    "tuning shapes": {"--shape": "--shapes"},
}


def _refuse_old_spellings(ctx, args: list[str]) -> None:
    renamed = RENAMED_OPTIONS.get(ctx.command_path.removeprefix(PROG).strip(), {})
    for arg in args:
        if arg == "--":
            return
        old = arg.split("=", 1)[0]
        if old in renamed:
            raise UsageError(f"{old} is now {renamed[old]}; did you mean {renamed[old]}?", ctx=ctx)


class Command(TyperCommand):
    """A subcommand: plain-text help with option panels, without importing pydantic for it."""

    def get_params(self, ctx) -> list:
        return plain_bool_flags(super().get_params(ctx))

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        _refuse_old_spellings(ctx, args)
        return super().parse_args(ctx, args)

    def format_options(self, ctx, formatter) -> None:
        _format_panels(self, ctx, formatter)

    def format_epilog(self, ctx, formatter) -> None:
        super().format_epilog(ctx, formatter)
        format_examples(ctx, formatter, PROG)

    def collect_usage_pieces(self, ctx) -> list[str]:
        return _usage_pieces(self, ctx)




def _silence_stdout() -> None:
    """The reader of stdout is gone (``| head``): later writes and the final flush go nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def run_main(group_main, args, prog_name, **extra) -> NoReturn:
    """Run the CLI and turn click's errors into this tool's one-line form (exit 2 for usage)."""
    try:
        code = group_main(args=args, prog_name=PROG, standalone_mode=False, **extra)
    except Ended as ended:  # its reason said already (params.fail)
        code = ended.code
    except NoArgsIsHelpError as err:
        err.show()
        code = 0
    except UsageError as err:
        where = err.ctx.command_path if err.ctx is not None else PROG
        print(f"{PROG}: {err.format_message()} (see '{where} -h')", file=sys.stderr, flush=True)
        code = ExitCode.USAGE
    except ClickException as err:
        print(f"{PROG}: {err.format_message()}", file=sys.stderr, flush=True)
        code = err.exit_code
    except Abort:
        print("interrupted", file=sys.stderr, flush=True)
        code = ExitCode.INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        code = ExitCode.PIPE_CLOSED
    except RunFolderError as err:  # a damaged run file (agent/run/run_files.py): one line naming it and the fix
        print(f"{PROG}: {printable(str(err))}", file=sys.stderr, flush=True)
        code = ExitCode.USAGE
    except (TooDeep, RecursionError) as err:  # a crafted or damaged file: one line naming it, never a traceback
        said = err.describe() if isinstance(err, TooDeep) else TooDeep().describe()
        print(f"{PROG}: {printable(said)}", file=sys.stderr, flush=True)
        code = ExitCode.USAGE
    except OSError as err:
        if (said := file_refusal(err)) is None:
            raise
        print(f"{PROG}: {printable(said)}", file=sys.stderr, flush=True)
        code = ExitCode.FAILED
    code = code if isinstance(code, int) else 0
    from agent.campaign.preload import still_loading

    if _END_AT_ONCE and still_loading():
        # The interpreter's teardown racing a daemon thread that is importing compiled extensions can
        # abort the process with no message (SIGABRT: 2 in 240 `resume` refusals on a loaded machine).
        # Every finally block has run by now, so the process ends without that teardown.
        end_when_written(code)
    sys.exit(code)


class Group(TyperGroup):
    """A command group with the same help; commands are listed under their panels."""

    def get_params(self, ctx) -> list:
        return plain_bool_flags(super().get_params(ctx))

    def format_options(self, ctx, formatter) -> None:
        _format_panels(self, ctx, formatter)
        panels: dict[str, list[tuple[str, str]]] = {}
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            panel = getattr(cmd, "rich_help_panel", None) or "Commands"
            panels.setdefault(panel, []).append((name, _description(cmd)))
        for title, rows in panels.items():
            with formatter.section(title):
                formatter.write_dl(rows)

    def format_epilog(self, ctx, formatter) -> None:
        super().format_epilog(ctx, formatter)
        format_examples(ctx, formatter, PROG)


def _description(cmd) -> str:
    """A command's first sentence, whole (wrapped by the list, never cut short with '...'); its -h has the rest."""
    text = " ".join((cmd.short_help or (cmd.help or "").split("\n\n", 1)[0]).split())
    return _SENTENCE_END.split(text, 1)[0]


_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!e\.g\.)(?<!i\.e\.)\s+(?=[A-Z`])")


def sub_app(help: str) -> typer.Typer:
    """A command group (e.g. ``tuning``) built like the main app."""
    return typer.Typer(cls=Group, help=help, no_args_is_help=True, rich_markup_mode=None,
                       add_completion=False, context_settings=CONTEXT)


CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
