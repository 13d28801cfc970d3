"""A report section is a title and blocks; each block renders to markdown and to HTML.

``Para`` and ``Items`` hold plain text (escaped in both forms); ``Markdown`` holds markdown written
by someone else (plan.md, research notes, evidence.md): shown as is in report.md and rendered in
report.html by markdown-it with raw HTML disabled, so its markup is formatting, never tags or
scripts. ``Image`` is a file in the run folder, embedded as a data URI so report.html stands alone: its HTML
holds a random slot, filled by ``embed_images`` once the page's text has been redacted (the image
bytes are ours, and a redaction pattern must never cut into them).
``Details`` folds blocks under a summary line in report.html (``<details>``); report.md shows them
under the summary in bold. Every table, ours or markdown's, scrolls inside its own box
(``div.scroll``), so a wide one never widens the page on a phone.
"""
from __future__ import annotations

import base64
import html
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from markdown_it import MarkdownIt

from agent.report.table import Table, md_text

_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table")


def _image_as_text(_renderer, tokens, idx, _options, _env) -> str:
    """A markdown image in someone else's text is shown as its words and address, never loaded: opening
    the report must not fetch anything (report.html's content security policy says the same)."""
    token = tokens[idx]
    alt = "".join(child.content for child in token.children or [])
    return f"[image not shown: {html.escape(alt)} &lt;{html.escape(str(token.attrGet('src') or ''))}&gt;]"


_MARKDOWN.add_render_rule("image", _image_as_text)


def render_markdown(text: str) -> str:
    # raw HTML is off, so a literal "<table>" in the text comes out escaped: only markdown's own tables match
    return _MARKDOWN.render(text).replace("<table>", '<div class="scroll"><table>').replace("</table>",
                                                                                          "</table></div>")


@dataclass
class Para:
    text: str
    css: str = ""

    def markdown(self) -> str:
        return md_text(self.text)

    def html(self) -> str:
        cls = f' class="{html.escape(self.css)}"' if self.css else ""
        return f"<p{cls}>{html.escape(md_text(self.text))}</p>"


@dataclass
class Items:
    items: list[str]

    def markdown(self) -> str:
        return "\n".join(f"- {md_text(i)}" for i in self.items)

    def html(self) -> str:
        return "<ul>" + "".join(f"<li>{html.escape(md_text(i))}</li>" for i in self.items) + "</ul>"


@dataclass
class Code:
    text: str

    def markdown(self) -> str:
        return "```\n" + self.text.replace("```", "` ` `") + "\n```"

    def html(self) -> str:
        return f"<pre>{html.escape(self.text)}</pre>"


@dataclass
class Markdown:
    text: str

    def markdown(self) -> str:
        return self.text.strip()

    def html(self) -> str:
        return f'<div class="md">{render_markdown(self.text)}</div>'


@dataclass
class Image:
    path: Path
    relative: str
    alt: str
    slot: str = field(default_factory=lambda: f"dsv4-image-{secrets.token_hex(12)}")  # no text can name it

    def markdown(self) -> str:
        return f"![{md_text(self.alt)}]({self.relative})"

    def html(self) -> str:
        alt = html.escape(self.alt)
        return f'<figure><img alt="{alt}" src="{self.slot}"><figcaption>{alt}</figcaption></figure>'

    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.path.read_bytes()).decode()


@dataclass
class Details:
    summary: str
    blocks: list = field(default_factory=list)

    def markdown(self) -> str:
        return "\n\n".join([f"**{md_text(self.summary)}**", *(b.markdown() for b in self.blocks)])

    def html(self) -> str:
        inner = "\n".join(b.html() for b in self.blocks)
        return f"<details><summary>{html.escape(md_text(self.summary))}</summary>\n{inner}</details>"


Block = Para | Items | Code | Markdown | Image | Table | Details


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    id: str = ""

    def markdown(self) -> str:
        return "\n\n".join(b.markdown() for b in self.blocks)

    def html(self) -> str:
        return "\n".join(b.html() for b in self.blocks)


def images_in(blocks: list) -> list[Image]:
    """Every ``Image`` among ``blocks`` (sections and details included)."""
    found: list[Image] = []
    for block in blocks:
        if isinstance(block, Image):
            found.append(block)
        elif isinstance(block, (Section, Details)):
            found += images_in(block.blocks)
    return found


def embed_images(page: str, images: list[Image]) -> str:
    """``page`` with each image's slot replaced by its data URI."""
    for image in images:
        page = page.replace(image.slot, image.data_uri())
    return page
