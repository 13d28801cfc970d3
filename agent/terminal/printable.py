"""Everything the agent prints to a terminal goes through ``printable`` (or ``one_line``).

Text from repositories, logs, servers and an LLM can hold escape sequences and bidi overrides;
``printable`` escapes C0/C1 controls (not newline and tab), DEL and the bidi controls, and text
given to rich is never markup.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

    from tools.jobs.outages import OutageWait

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
    from rich.text import Text  # deferred: `--help` never loads rich

    return Text(printable(value), style=style)


def echo(value: object = "", err: bool = False) -> None:
    """Print one message (stdout, or stderr with ``err``), printable."""
    stream = sys.stderr if err else sys.stdout
    stream.write(printable(value) + "\n")
    stream.flush()


def gpu_list(gpus: list[int] | None) -> str:
    """A job's GPUs as the live view and ``jobs`` show them: ``0,1``, or ``-`` for none."""
    return ",".join(map(str, gpus)) if gpus else "-"


def outage_wait() -> "OutageWait":
    """The outage wait of commands outside a campaign, its retry lines on stderr."""
    from tools.jobs.outages import OutageWait

    return OutageWait(notify=lambda line: echo(f"dsv4-agent: {line}", err=True))
