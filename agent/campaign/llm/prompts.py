"""Prompt texts: ``prompts/<name>.md``, rendered with jinja2 and ``StrictUndefined``.

A variable a template uses but the caller did not pass is an error, never an empty string.
``quote_untrusted`` is the one way text read from repositories, logs or servers reaches the
model: a fenced block, with a fence longer than any backtick run inside (so the text cannot
close it), under a header naming its origin and saying it is data, never instructions.
"""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parents[3] / "prompts"


@cache
def _env():
    """The environment, made at the first prompt: a run without an LLM never imports jinja2 for prompts."""
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)), undefined=jinja2.StrictUndefined,
                              autoescape=False, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)


class PromptError(Exception):
    """A prompt is missing or was rendered without a variable it needs."""


def prompt_names() -> list[str]:
    return sorted(p.stem for p in PROMPTS_DIR.glob("*.md"))


def render(name: str, **variables: object) -> str:
    import jinja2

    try:
        return _env().get_template(f"{name}.md").render(**variables)
    except jinja2.TemplateNotFound:
        raise PromptError(f"no prompt {name!r} in {PROMPTS_DIR} (have: {', '.join(prompt_names())})") from None
    except jinja2.UndefinedError as err:
        raise PromptError(f"prompt {name!r} needs a variable that was not passed: {err.message}") from None


def _origin_text(origin: str) -> str:
    # One line, no backticks: the header itself must not be a way in.
    return re.sub(r"[\r\n`]+", " ", origin).strip()[:300] or "unknown origin"


def quote_untrusted(text: str, origin: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return render("untrusted_data", origin=_origin_text(origin), fence=fence, text=text)
