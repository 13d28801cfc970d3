"""Shared building blocks for tools: the tool declaration and capped, reader-facing text.

Every tool module declares ``SOMETHING = Tool(name=..., args=SomeArgs, run=some_function)``;
the LLM registry (agent side) turns ``args`` into an OpenAI tool schema, so the ``Args``
docstring and field descriptions are the only description a model ever sees.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Generic, TypeVar

if TYPE_CHECKING:  # ToolError is raised by readers that load no model (the job listing)
    from pydantic import BaseModel

A = TypeVar("A", bound="BaseModel")
R = TypeVar("R", bound="BaseModel")


class ToolError(Exception):
    """An expected, user-facing failure: the message names the problem and the fix."""


@dataclass(frozen=True)
class Tool(Generic[A, R]):
    name: str
    args: type[A]
    run: Callable[[A], R]

    def call(self, raw: dict) -> R:
        """Validate raw arguments (pydantic raises ValidationError on bad ones) and run."""
        return self.run(self.args.model_validate(raw))


@dataclass(frozen=True)
class Capped:
    text: str
    truncated: bool
    note: str  # says what was cut and which limit was hit; empty when nothing was cut


def cap_lines(lines: list[str], max_lines: int, max_chars: int, what: str = "lines") -> Capped:
    """Join lines for a reader, stopping at whichever limit comes first and saying so."""
    kept: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        if i >= max_lines:
            note = f"[cut: {len(lines) - i} more {what}; limit {max_lines} {what}]"
            return Capped("\n".join(kept), True, note)
        if used + len(line) + 1 > max_chars:
            note = f"[cut: {len(lines) - i} more {what}; limit {max_chars} characters]"
            return Capped("\n".join(kept), True, note)
        kept.append(line)
        used += len(line) + 1
    return Capped("\n".join(kept), False, "")


def cap_text(text: str, max_chars: int) -> Capped:
    """Cap a free text from the end (logs: the tail matters most)."""
    if len(text) <= max_chars:
        return Capped(text, False, "")
    cut = len(text) - max_chars
    return Capped(text[-max_chars:], True, f"[cut: first {cut} characters; limit {max_chars} characters]")
