"""Search the SGLang source: ripgrep (the ``rg`` shipped by the ``ripgrep`` wheel) with a
pure-Python fallback when no ``rg`` can be found.

Hits are structured (path relative to the root, 1-based line, text) and capped; the result
says what was cut. The pattern is passed to rg as an argument list after ``-e`` (never through
a shell), so text read from anywhere is only ever data.
"""
from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.child_env import child_env
from tools.source.confine import read_bounded

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


@dataclass(frozen=True, slots=True)
class Hit:
    """One hit. A dataclass, not a model: thousands come per search, made straight from rg's output
    (pydantic still validates it from JSON, dumps it as an object and gives it a schema)."""

    path: Annotated[str, Field(description="Relative to the search root")]
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


# Plain output, one line per hit: ``path\0line:text``. Cheaper to read than ``--json`` (a quarter
# of the bytes, no JSON decoding) and the NUL keeps paths with ``:`` unambiguous.
_PLAIN = ["--no-heading", "--with-filename", "--line-number", "--null", "--color", "never"]


def rg_command(args: SearchArgs, rg: str, in_path_order: bool = False) -> list[str]:
    """The rg argv for these arguments (benchmarks time this exact command as the reference).
    ``in_path_order``: one thread, hits in path order (``--sort path``), to cut a flood at the first
    ``max_hits``."""
    cmd = [rg, "--no-config", "--hidden", "--no-ignore-vcs", "--glob", "!.git"]
    cmd += ["--fixed-strings"] if args.fixed_string else []
    cmd += ["--ignore-case"] if args.ignore_case else []
    cmd += ["--word-regexp"] if args.word else []
    for pattern in args.glob:
        cmd += ["--glob", pattern]
    cmd += ["--files-with-matches"] if args.files_only else _PLAIN
    cmd += ["--sort", "path"] if in_path_order else []
    return cmd + ["-e", args.pattern, "--", "."]


def path_order(path: str) -> tuple[str, ...]:
    """The order rg's ``--sort path`` walks in: folder by folder, names compared within each."""
    return tuple(path.split("/"))


# One hit line of the plain output: path (after an optional "./"), NUL, line number, ":", text (the
# first MAX_LINE_CHARS characters captured, the rest of the line matched and dropped).
_HIT_LINE = re.compile(r"^(?:\./)?([^\0\n]*)\0(\d+):([^\n]{0,%d})[^\n]*$" % MAX_LINE_CHARS, re.M)


def _parse_hits(output: bytes) -> list[Hit]:
    """Every hit line at once (lines that are not hits, e.g. rg's "binary file matches" notice for
    an explicit file, do not match); one decode and one regex pass instead of work per line."""
    return [Hit(path, int(number), text) for path, number, text in _HIT_LINE.findall(output.decode(errors="replace"))]


def _read_hits(proc: subprocess.Popen, limit: int | None, files_only: bool) -> tuple[list[Hit], bool]:
    """rg's hits, parsed a chunk at a time as rg writes them (the parsing overlaps rg's search
    instead of following it); with a limit, stops (kills our own child) once more than ``limit``
    hits came, so a flood is read only as far as the cut."""
    hits: list[Hit] = []
    pending = b""
    while True:
        chunk = proc.stdout.read1(1 << 16)
        if not chunk:
            break
        end = chunk.rfind(b"\n") + 1
        if not end:  # no whole line yet
            pending += chunk
            continue
        lines, pending = pending + chunk[:end], chunk[end:]
        hits += _parse_files(lines) if files_only else _parse_hits(lines)
        if limit is not None and len(hits) > limit:
            proc.kill()  # stop reading a flood early
            return hits, True
    if pending:  # output that does not end in a newline
        hits += _parse_files(pending) if files_only else _parse_hits(pending)
    return hits, False


def _parse_files(output: bytes) -> list[Hit]:
    return [Hit(_rel(name), 0, "") for name in output.decode(errors="replace").splitlines() if name]


def _run(cmd: list[str], root: str, limit: int | None) -> tuple[list[Hit], bool, int | None, str]:
    """Hits of one rg call; with a limit, stops once more than ``limit`` came."""
    files_only = "--files-with-matches" in cmd
    with subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env()) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        hits, cut = _read_hits(proc, limit, files_only)
        stderr = proc.stderr.read().decode(errors="replace")
    return hits, cut, proc.returncode, stderr


def _rg(args: SearchArgs, rg: str) -> SearchResult:
    # files_only output is one short line per file: read it all, so the cut is by path order
    hits, truncated, code, stderr = _run(rg_command(args, rg), args.root, None if args.files_only else args.max_hits)
    if code == 2 and not hits and not truncated:
        raise ToolError(f"search failed: {stderr.strip().splitlines()[-1] if stderr.strip() else 'rg error'}; "
                        "check the pattern (Rust regex syntax) or pass fixed_string=true")
    if truncated:
        hits = _first_in_path_order(args, rg)
    return _finish(hits, args, truncated or len(hits) > args.max_hits, "rg")


def _first_in_path_order(args: SearchArgs, rg: str) -> list[Hit]:
    """After a cut: the first ``max_hits`` hits by (path, line), whatever order the parallel walk
    produced them in. rg walks in path order on one thread and is stopped as soon as one hit more
    than ``max_hits`` came: a flood is read only as far as the cut."""
    hits, _cut, _code, _stderr = _run(rg_command(args, rg, in_path_order=True), args.root, args.max_hits)
    return hits


def _rel(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def _in_path_order(hits: list[Hit]) -> list[Hit]:
    """Hits by (path, line). rg prints each file's hits together, by line: the files are sorted, not
    every hit (a few hundred keys instead of thousands)."""
    by_file: dict[str, list[Hit]] = {}
    for hit in hits:
        by_file.setdefault(hit.path, []).append(hit)
    ordered: list[Hit] = []
    for path in sorted(by_file, key=path_order):
        rows = by_file[path]
        rows.sort(key=_line)  # already in order from rg: a pass that checks it
        ordered += rows
    return ordered


def _line(hit: Hit) -> int:
    return hit.line


def _finish(hits: list[Hit], args: SearchArgs, truncated: bool, engine: str) -> SearchResult:
    hits = _in_path_order(hits)  # rg walks in parallel: a stable order
    note = ""
    if truncated:
        hits = hits[: args.max_hits]  # the first max_hits by (path, line): the same whichever engine ran
        note = f"[cut: more hits after {args.max_hits}; limit max_hits={args.max_hits}; narrow the pattern or glob]"
    return SearchResult.model_construct(hits=hits, truncated=truncated, note=note, engine=engine)


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
    for rel in _files_in_path_order(root):
        name = rel.rsplit("/", 1)[-1]
        if args.glob and not any(fnmatch.fnmatch(name, g) or fnmatch.fnmatch(rel, g) for g in args.glob):
            continue
        try:
            text = read_bounded(root / rel).decode(errors="replace")
        except (OSError, ValueError):
            continue  # unreadable, not a regular file, over the cap: rg skips it too
        for number, line in enumerate(text.splitlines(), start=1):
            if regex.search(line):
                hits.append(Hit(rel, 0, "") if args.files_only else Hit(rel, number, line[:MAX_LINE_CHARS]))
                if args.files_only:
                    break
        if len(hits) > args.max_hits:
            return _finish(hits, args, True, "python")  # files go in path order: the first max_hits are final
    return _finish(hits, args, False, "python")


def _files_in_path_order(root: Path) -> list[str]:
    """Relative paths of the regular files under root (not inside .git, symlinks not followed: rg
    skips them too), in the order hits are sorted in, so a cut keeps the same hits as the rg engine."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        base = Path(folder)
        found += [(base / f).relative_to(root).as_posix() for f in files
                  if not (base / f).is_symlink() and (base / f).is_file()]
    return sorted(found, key=path_order)


def search(args: SearchArgs, rg: str | None = None) -> SearchResult:
    if not Path(args.root).is_dir():
        raise ToolError(f"search root {args.root} is not a folder; resolve the SGLang source first")
    binary = rg if rg is not None else find_rg()
    if binary:
        return _rg(args, binary)
    return _python(args)


SEARCH = Tool(name="search", args=SearchArgs, run=search)
