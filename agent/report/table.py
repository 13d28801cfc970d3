"""One table type for every report table: rendered to markdown and to HTML, every cell escaped.

Cells are data (step summaries, LLM text, paths from a repo): in markdown a ``|`` would end the
cell, a newline the row and a backslash escape the next character; in HTML ``<``, ``&`` and quotes
are markup. ``markdown()`` and ``html()`` neutralise each, and control characters become spaces,
so no cell can change the table's shape or inject markup in either form.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u2028\u2029\x85]")


def md_cell(value: object) -> str:
    text = _CONTROL.sub(" ", "" if value is None else str(value))
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ").strip()


def md_text(value: object) -> str:
    """A line of plain text for markdown: control characters and line breaks become spaces."""
    return _CONTROL.sub(" ", "" if value is None else str(value)).replace("\r", " ").replace("\n", " ")


@dataclass
class Table:
    columns: list[str]
    rows: list[list[object]] = field(default_factory=list)
    id: str | None = None

    def add(self, *cells: object) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"row has {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(list(cells))

    def markdown(self) -> str:
        lines = ["| " + " | ".join(md_cell(c) for c in self.columns) + " |",
                 "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in self.rows]
        return "\n".join(lines)

    def html(self) -> str:
        ident = f' id="{html.escape(self.id)}"' if self.id else ""
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(_CONTROL.sub(' ', '' if c is None else str(c)))}</td>"
                                        for c in row) + "</tr>" for row in self.rows)
        return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
