"""User-facing messages asserted by their shape and the facts a person acts on, never by their prose.

A refusal is one line on stderr, ``dsv4-agent: <what is wrong and the fix>``, with a documented exit
code and no traceback. Tests check that shape here, once, and name only the facts in the line a
person must act on (a path, an option, a setting, a command to run, a GPU index, the reason when it
is the point of the test); rewording a message then breaks no test (docs/testing.md).
"""
from __future__ import annotations

import re
import shlex
import subprocess
import unicodedata
from os import PathLike
from typing import TYPE_CHECKING, Union

from agent.exit_codes import ExitCode

if TYPE_CHECKING:
    import click.testing

PREFIX = "dsv4-agent: "
Outcome = Union[subprocess.CompletedProcess, "click.testing.Result"]  # run_cli/agent(), or typer's CliRunner


def assert_refusal(result: Outcome, *names: str | PathLike,
                   code: int | tuple[int, ...] = ExitCode.USAGE, quiet: bool = False) -> str:
    """``result`` ended with ``code`` (or one of them) and said why in one well-formed line naming every one
    of ``names``; ``quiet``: and printed nothing on stdout. Returns the line."""
    both = result.stdout + result.stderr
    codes = code if isinstance(code, tuple) else (code,)
    ended = getattr(result, "returncode", getattr(result, "exit_code", None))  # a process, or typer's CliRunner
    assert ended in codes, (f"exit {ended}, not {codes!r}", both[-3000:])
    assert "Traceback" not in both, both[-3000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and result.stderr.endswith("\n"), ("not one line on stderr", result.stderr[-3000:])
    assert_message(lines[0], *names)
    assert not quiet or result.stdout == "", ("stdout is not empty", result.stdout[-3000:])
    return lines[0]


def assert_message(line: str, *names: str | PathLike, prefix: str = PREFIX) -> str:
    """``line`` is one of the agent's messages: the prefix, no control characters, every name in it."""
    assert line.startswith(prefix), (f"does not start with {prefix!r}", line)
    bad = [c for c in line if unicodedata.category(c) in ("Cc", "Cf")]
    assert not bad, (f"control characters {bad!r}", line)
    missing = [str(name) for name in names if not mentions(line, name)]
    assert not missing, (f"not named: {missing!r}", line)
    return line


def message_naming(text: str, *names: str | PathLike, prefix: str = PREFIX) -> str:
    """The one line of ``text`` (a stream that may hold other output) that names all of ``names``,
    checked as a message starting with ``prefix`` (a warning; ``note: `` for a report's notes). Returns it."""
    found = [line for line in text.splitlines() if all(mentions(line, name) for name in names)]
    assert len(found) == 1, (f"{len(found)} lines name {[str(n) for n in names]!r}", text[-3000:])
    return assert_message(found[0], *names, prefix=prefix)


def mentions(line: str, name: str | PathLike) -> bool:
    """``name`` is in ``line`` as itself (``--tp`` is not in ``--tpx``, ``3`` is not in ``31``), as it is
    or shell-quoted (a path with a space is shown quoted)."""
    text = str(name)
    return any(re.search(_whole(form), line) for form in {text, shlex.quote(text)})


def _whole(name: str) -> str:
    """A pattern for ``name`` not glued to a word character at an edge that is one itself."""
    start = r"(?<![\w])" if re.match(r"\w", name) else ""
    end = r"(?![\w])" if re.search(r"\w$", name) else ""
    return start + re.escape(name) + end


def assert_run_setting_refused(result: Outcome, setting: str, option: str) -> str:
    """A setting a run folder recorded, refused: the line names the setting, the reason (the point of
    these refusals), the option that gives it again and the command that allows the folder."""
    return assert_refusal(result, f"setting {setting}", "never taken from a run folder", option,
                          "dsv4-agent config allow")


def assert_finished_refused(result: Outcome, run_name: str) -> str:
    """A finished run, refused another drive: the line names the run, says it finished and how to inspect it."""
    return assert_refusal(result, run_name, "finished", "dsv4-agent status")
