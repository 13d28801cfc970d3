"""The one jinja environment every generated shell script is rendered with.

A value reaches a script only through a filter that says where it goes: ``q`` (shell words, each
quoted), ``comment`` (a ``#`` line: control characters and line separators become spaces, so it
cannot end the comment) or ``sbatch`` (an ``#SBATCH`` line, read by Slurm without a shell: plain
characters only). Anything else in ``{{ ... }}`` but an integer is refused (``finalize``), so a
forgotten filter cannot put raw text into a script; a missing variable is an error (``StrictUndefined``).
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import jinja2

TEMPLATES = Path(__file__).with_name("templates")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")
_SBATCH = re.compile(r"^[A-Za-z0-9._:=-]*$")


class ShellText(str):
    """Text a filter made safe for the place it is rendered."""


# Words shlex leaves bare that read as something else where they land (NAME==x, NAME=then): quoted anyway.
_RESERVED = {"!", "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if", "in",
             "select", "then", "time", "until", "while"}


def _word(value: object) -> str:
    text = shlex.quote(str(value))
    return f"'{text}'" if text.startswith("=") or text in _RESERVED else text


def quote(value: object) -> ShellText:
    if isinstance(value, (list, tuple)):
        return ShellText(" ".join(_word(v) for v in value))
    return ShellText(_word(value))


def comment(value: object) -> ShellText:
    text = _CONTROL.sub(" ", str(value))
    # A comment that starts with "shellcheck" is a directive to shellcheck, not text: say it is text.
    return ShellText(f"text: {text}" if text.lstrip().lower().startswith("shellcheck") else text)


def sbatch_value(value: object) -> ShellText:
    text = str(value)
    if not _SBATCH.match(text):
        raise ValueError(f"{text!r} cannot go into an #SBATCH line (letters, digits and . _ : = - only)")
    return ShellText(text)


def _finalize(value: object) -> object:
    if isinstance(value, (ShellText, int)):
        return value
    raise ValueError(f"a template printed {value!r} without a filter; pass it through q, comment or sbatch")


def environment(loader: jinja2.BaseLoader | None = None) -> jinja2.Environment:
    env = jinja2.Environment(loader=loader or jinja2.FileSystemLoader(str(TEMPLATES)),
                             undefined=jinja2.StrictUndefined, finalize=_finalize, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters.update(q=quote, comment=comment, sbatch=sbatch_value)
    return env
