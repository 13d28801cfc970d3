"""The report's one jinja environment: report.html (autoescaped) and report.md from the same data."""
from __future__ import annotations

from pathlib import Path

import jinja2

from agent.report.blocks import Section
from agent.report.table import md_text

TEMPLATES = Path(__file__).with_name("templates")
_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                          autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default=False),
                          trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
_ENV.filters["mdtext"] = md_text


def render(title: str, header: list[tuple[str, str]], verdict: Section | None, verdict_ok: bool,
           sections: list[Section]) -> tuple[str, str]:
    """(markdown, html) of the whole report."""
    data = {"title": title, "header": header, "verdict": verdict, "verdict_ok": verdict_ok, "sections": sections}
    return _ENV.get_template("report.md.j2").render(**data), _ENV.get_template("report.html.j2").render(**data)
