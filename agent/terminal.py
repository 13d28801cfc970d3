"""Everything the agent prints to a terminal goes through ``printable`` (or ``one_line``).

Text from repositories, logs, servers, run folders and an LLM can carry control characters: an
escape sequence can recolour or rewrite the screen, retitle the window, or hide a line behind a
carriage return, and bidirectional overrides can show text in another order than it is read.
``printable`` shows each of them escaped (``\\x1b``, ``\\u202e``): C0 and C1 controls but newline
and tab, DEL, and the bidi controls, so what a person reads is what the text says. Rich renders
our own colours and tables; the text we give it is made printable first and never read as rich
markup (``text`` makes a ``Text``).
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

_BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_ESCAPED = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}")
            for c in [*range(0x00, 0x20), *range(0x7F, 0xA0), *_BIDI] if c not in (0x09, 0x0A)}
_ONE_LINE = {**_ESCAPED, 0x0A: " "}


def printable(value: object) -> str:
    """``value`` as text a terminal shows as it is: control characters escaped, newlines kept."""
    return str(value).translate(_ESCAPED)


def one_line(value: object) -> str:
    """``printable``, with newlines as spaces (a table cell, a status line)."""
    return str(value).translate(_ONE_LINE)


def text(value: object, style: str = "") -> "Text":
    """A rich ``Text`` of ``value``, printable and never parsed as markup."""
    from rich.text import Text  # here, not at import: `--help` never loads rich

    return Text(printable(value), style=style)


def echo(value: object = "", err: bool = False) -> None:
    """Print one message (stdout, or stderr with ``err``), printable."""
    stream = sys.stderr if err else sys.stdout
    stream.write(printable(value) + "\n")
    stream.flush()


def gpu_list(gpus: list[int] | None) -> str:
    """A job's GPUs as the live view and ``jobs`` both show them: ``0,1``; ``-`` for none (a bench
    client) or none recorded."""
    return ",".join(map(str, gpus)) if gpus else "-"
