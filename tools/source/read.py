"""``read_source_file``: a bounded read of one file inside the resolved SGLang source.

The path must stay inside the root after resolving ``..`` and symlinks (the LLM chooses it;
``tools/source/confine.py``);
lines come back numbered, capped, with a note of what was cut.
"""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError, cap_lines
from tools.source.confine import inside_root, read_bounded

MAX_LINES = 400
MAX_CHARS = 40_000


class ReadSourceFileArgs(BaseModel):
    """Read a line range of a file in the SGLang source tree (path relative to the source root)."""

    root: str = Field(description="The SGLang source root")
    path: str = Field(description="File path relative to the root, e.g. sglang/srt/arg_groups/deepseek_v4_hook.py")
    start: int = Field(1, ge=1, description="First line (1-based)")
    end: int | None = Field(None, ge=1, description="Last line (inclusive); None = start + 199")


class SourceText(BaseModel):
    path: str
    start: int
    end: int
    total_lines: int
    text: str = Field(description="Lines prefixed with their numbers")
    truncated: bool
    note: str


def read_source_file(args: ReadSourceFileArgs) -> SourceText:
    root = Path(args.root).resolve()
    target = inside_root(root, args.path)
    if not target.exists() or target.is_dir():  # anything else that exists is refused by read_bounded, named
        raise ToolError(f"{args.path} is not a file in the SGLang source; find paths with the search tool first")
    try:
        lines = read_bounded(target).decode(errors="replace").splitlines()
    except ValueError as err:
        raise ToolError(f"{args.path}: {err}; read another file (find paths with the search tool)") from None
    end = min(args.end or args.start + 199, len(lines))
    if args.start > max(len(lines), 1):
        raise ToolError(f"{args.path} has {len(lines)} lines; start={args.start} is past the end")
    numbered = [f"{n:>6}  {lines[n - 1]}" for n in range(args.start, end + 1)]
    capped = cap_lines(numbered, MAX_LINES, MAX_CHARS)
    shown = args.start + len(capped.text.splitlines()) - 1 if capped.text else args.start - 1
    return SourceText(path=target.relative_to(root).as_posix(), start=args.start, end=shown,
                      total_lines=len(lines), text=capped.text, truncated=capped.truncated, note=capped.note)


READ_SOURCE_FILE = Tool(name="read_source_file", args=ReadSourceFileArgs, run=read_source_file)
