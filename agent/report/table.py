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

from tools.markdown import md_text, markdown_table, without_control

__all__ = ["Table", "md_text"]
_NUMBER = re.compile(r"-?[\d.,]+(?:×)?(?: \([\d.,]+–[\d.,]+\))?")  # 2.37, 0.65× (0.65–0.70): right-aligned


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
        return markdown_table(self.columns, self.rows)

    def html(self) -> str:
        ident = f' id="{html.escape(self.id)}"' if self.id else ""
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in self.rows)
        # in a box of its own that scrolls sideways: a wide table never widens the page
        return f'<div class="scroll"><table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _cell(value: object) -> str:
    text = without_control(value)
    css = ' class="num"' if _NUMBER.fullmatch(text) else ""
    return f"<td{css}>{html.escape(text)}</td>"
