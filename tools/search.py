"""Search the SGLang source: ripgrep (the ``rg`` shipped by the ``ripgrep`` wheel) with a
pure-Python fallback when no ``rg`` can be found.

Hits are structured (path relative to the root, 1-based line, text) and capped; the result
says what was cut. The pattern is passed to rg as an argument list after ``-e`` (never through
a shell), so text read from anywhere is only ever data.
"""
from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError

MAX_LINE_CHARS = 300  # one minified line must not flood the reader


class SearchArgs(BaseModel):
    """Search the SGLang source tree for a regex (or a fixed string); returns path:line hits."""

    pattern: str = Field(description="Regular expression (Rust regex syntax) or, with fixed_string, a literal")
    root: str = Field(description="Folder to search (the resolved SGLang source root)")
    glob: list[str] = Field(default_factory=list, description="Only files matching these globs, e.g. ['*.py']")
    max_hits: int = Field(200, ge=1, le=5000, description="Stop after this many hits")
    fixed_string: bool = Field(False, description="Treat the pattern as a literal string")
    ignore_case: bool = Field(False, description="Case-insensitive match")
    word: bool = Field(False, description="Match whole words only")
    files_only: bool = Field(False, description="Return one hit per matching file (line 0, no text)")


class Hit(BaseModel):
    path: str = Field(description="Relative to the search root")
    line: int
    text: str


class SearchResult(BaseModel):
    hits: list[Hit]
    truncated: bool
    note: str = Field("", description="What was cut and which limit was hit; empty when nothing was cut")
    engine: str = Field("rg", description="rg or python (fallback)")


def find_rg() -> str | None:
    """rg on PATH, else the one the ripgrep wheel put in this interpreter's scripts folder."""
    found = shutil.which("rg")
    if found:
        return found
    candidate = Path(sysconfig.get_path("scripts")) / "rg"
    return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None


def _rg(args: SearchArgs, rg: str) -> SearchResult:
    cmd = [rg, "--json", "--no-config", "--hidden", "--no-ignore-vcs", "--glob", "!.git"]
    cmd += ["--fixed-strings"] if args.fixed_string else []
    cmd += ["--ignore-case"] if args.ignore_case else []
    cmd += ["--word-regexp"] if args.word else []
    cmd += ["--files-with-matches"] if args.files_only else []
    for pattern in args.glob:
        cmd += ["--glob", pattern]
    if args.files_only:
        cmd = [c for c in cmd if c != "--json"]
    cmd += ["-e", args.pattern, "--", "."]
    hits: list[Hit] = []
    truncated = False
    with subprocess.Popen(cmd, cwd=args.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        for raw in proc.stdout:
            if args.files_only:
                hits.append(Hit(path=_rel(raw.decode(errors="replace").strip()), line=0, text=""))
            else:
                event = json.loads(raw)
                if event["type"] != "match":
                    continue
                data = event["data"]
                text = data["lines"].get("text") or data["lines"].get("bytes", "")
                hits.append(Hit(path=_rel(data["path"].get("text", "")), line=data["line_number"],
                                text=text.rstrip("\n")[:MAX_LINE_CHARS]))
            if len(hits) > args.max_hits:
                truncated = True
                proc.kill()  # our own child: stop reading a flood early
                break
        stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode == 2 and not hits and not truncated:
        raise ToolError(f"search failed: {stderr.strip().splitlines()[-1] if stderr.strip() else 'rg error'}; "
                        "check the pattern (Rust regex syntax) or pass fixed_string=true")
    return _finish(hits, args, truncated, "rg")


def _rel(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def _finish(hits: list[Hit], args: SearchArgs, truncated: bool, engine: str) -> SearchResult:
    hits.sort(key=lambda h: (h.path, h.line))  # rg walks in parallel: make the order stable
    note = ""
    if truncated:
        hits = hits[: args.max_hits]
        note = f"[cut: more hits after {args.max_hits}; limit max_hits={args.max_hits}; narrow the pattern or glob]"
    return SearchResult(hits=hits, truncated=truncated, note=note, engine=engine)


def _python(args: SearchArgs) -> SearchResult:
    """Fallback: walk the tree and match line by line with Python's re."""
    source = re.escape(args.pattern) if args.fixed_string else args.pattern
    if args.word:
        source = rf"\b(?:{source})\b"
    try:
        regex = re.compile(source, re.I if args.ignore_case else 0)
    except re.error as err:
        raise ToolError(f"bad search pattern {args.pattern!r} ({err}); pass fixed_string=true for a literal") from None
    root = Path(args.root)
    hits: list[Hit] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(files):
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if args.glob and not any(fnmatch.fnmatch(name, g) or fnmatch.fnmatch(rel, g) for g in args.glob):
                continue
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue  # unreadable file: rg skips it too
            for number, line in enumerate(text.splitlines(), start=1):
                if regex.search(line):
                    hits.append(Hit(path=rel, line=0 if args.files_only else number,
                                    text="" if args.files_only else line[:MAX_LINE_CHARS]))
                    if args.files_only:
                        break
            if len(hits) > args.max_hits:
                return _finish(hits, args, True, "python")
    return _finish(hits, args, False, "python")


def search(args: SearchArgs, rg: str | None = None) -> SearchResult:
    if not Path(args.root).is_dir():
        raise ToolError(f"search root {args.root} is not a folder; resolve the SGLang source first")
    binary = rg if rg is not None else find_rg()
    if binary:
        return _rg(args, binary)
    return _python(args)


SEARCH = Tool(name="search", args=SearchArgs, run=search)
