"""What the CLI relies on from typer's private API (agent/commands/typer_internals.py), pinned so
that a typer upgrade which moves or changes it fails here, naming the piece, not in a command."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated

import pytest
import typer
from typer.main import get_command

from agent.commands.typer_internals import ClickException, NoArgsIsHelpError, UsageError, plain_bool_flags
from tests.slowdown import limit

ROOT = Path(__file__).resolve().parents[1]


def _app() -> typer.Typer:
    app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_enable=False)

    @app.command()
    def go(fast: Annotated[bool, typer.Option("--fast")] = False) -> None:
        print(f"fast={fast}")

    @app.command()
    def other() -> None:
        pass

    return app


def test_an_unknown_option_raises_this_usage_error_with_its_context():
    with pytest.raises(UsageError) as caught:
        get_command(_app()).main(["go", "--nope"], prog_name="x", standalone_mode=False)
    assert isinstance(caught.value, ClickException) and caught.value.exit_code == 2
    assert caught.value.ctx is not None and caught.value.ctx.command_path == "x go"
    assert "--nope" in caught.value.format_message()


def test_no_arguments_to_a_no_args_is_help_group_raises_this_error():
    with pytest.raises(NoArgsIsHelpError) as caught:
        get_command(_app()).main([], prog_name="x", standalone_mode=False)
    assert callable(caught.value.show)


def test_boolean_flags_get_a_pass_through_coercion_that_still_parses(capsys):
    command = get_command(_app()).commands["go"]
    ctx = command.make_context("go", [])
    params = plain_bool_flags(command.get_params(ctx))
    fast = next(p for p in params if p.name == "fast")
    assert type(fast._runtime_param).__name__ == "PassThroughRuntimeParam"
    command.main(["--fast"], prog_name="go", standalone_mode=False)
    assert capsys.readouterr().out == "fast=True\n"


def test_help_imports_no_pydantic():
    code = ("import sys\nfrom agent.commands.cli import app\nfrom typer.main import get_command\n"
            "try:\n    get_command(app).main(['status', '--help'], prog_name='dsv4-agent')\n"
            "except SystemExit:\n    pass\nprint('pydantic' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=limit(60))
    assert "Usage:" in done.stdout, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "False"
