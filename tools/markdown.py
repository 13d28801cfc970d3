"""The one markdown table renderer: every cell escaped, so no cell can change a table's shape.

Cells are data (paths and text from a repository, an LLM's words, a log line): a ``|`` would end
the cell, a newline the row, a backslash escape the next character. ``md_cell`` neutralises each,
and control characters become spaces. A cell that is markdown on purpose (a code span, bold) is
made with ``md_code`` or wrapped in ``Markdown`` and passes as it is.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u2028\u2029\x85]")
_TICKS = re.compile(r"`+")
_PIPE = re.compile(r"(\\*)\|")  # a pipe and the backslashes before it


class Markdown(str):
    """Text that is markdown already: a table takes it as it is (line breaks still become spaces)."""


def without_control(value: object) -> str:
    """``value`` as text (None as nothing) with control characters made spaces; line breaks kept."""
    return _CONTROL.sub(" ", "" if value is None else str(value))


def md_text(value: object) -> str:
    """A line of plain text for markdown: control characters and line breaks become spaces."""
    return without_control(value).replace("\r", " ").replace("\n", " ")


def md_cell(value: object) -> str:
    if isinstance(value, Markdown):
        return md_text(value).strip()
    return md_text(value).replace("\\", "\\\\").replace("|", "\\|").strip()


def md_code(value: object) -> Markdown:
    """``value`` as a code span: fenced by more backticks than it holds, every ``|`` escaped (a
    table splits on it even inside code, unless an odd number of backslashes comes before it)."""
    text = md_text(value)
    fence = "`" * (max((len(m) for m in _TICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    text = _PIPE.sub(lambda m: m.group(1) + "\\" * (1 + len(m.group(1)) % 2) + "|", text)
    return Markdown(f"{fence}{pad}{text}{pad}{fence}")


def markdown_table(columns: Sequence[object], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(md_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"row has {len(row)} cells for {len(columns)} columns")
        lines.append("| " + " | ".join(md_cell(c) for c in row) + " |")
    return "\n".join(lines)
