"""Parsed Python source for the evidence engine: one parse per file content per process, cheap text prefilters.

An inference parses a few hundred files and walks their trees many times; besides the parse, the
cyclic GC re-traversing every held node and walks of whole methods with no call of interest cost most.

- ``parse_file`` caches trees by a digest of the bytes (not mtime: a same-size rewrite within one
  clock tick must not hit a stale tree). Trees are shared: callers treat them as read-only.
- ``gc_paused`` turns the cyclic collector off around parse-heavy work (ASTs hold no cycles).
- ``LineIndex`` says whether a node's lines can contain an identifier, from the text: a necessary
  condition only, and no answer for non-ASCII text (NFKC can change names) or ``\r`` line ends.
"""
from __future__ import annotations

import ast
import bisect
import gc
import hashlib
import re
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tools.source.confine import read_bounded

# Several times an SGLang tree's Python source, so a second inference in the process (sync, a campaign)
# parses nothing again, while the trees' memory stays bounded.
MAX_CACHED_CHARS = 16_000_000


class TreeCache:
    """Parsed trees keyed by a digest of the file's bytes, least recently used dropped past max_chars."""

    def __init__(self, max_chars: int):
        self.max_chars = max_chars
        self._trees: OrderedDict[bytes, tuple[ast.Module, str]] = OrderedDict()
        self._chars = 0

    def parse(self, path: Path) -> tuple[ast.Module, str]:
        """(tree, text) of a Python file; OSError, SyntaxError or ValueError (also from
        ``confine.read_bounded`` for a file that is not regular or too big)."""
        data = read_bounded(path)
        key = hashlib.blake2b(data, digest_size=20).digest()
        hit = self._trees.get(key)
        if hit is not None:
            self._trees.move_to_end(key)
            return hit
        text = data.decode(errors="replace")
        tree = ast.parse(text, filename=str(path))
        self._trees[key] = (tree, text)
        self._chars += len(text)
        while self._chars > self.max_chars and len(self._trees) > 1:
            _, (_, dropped) = self._trees.popitem(last=False)
            self._chars -= len(dropped)
        return tree, text

    def texts(self) -> list[str]:
        """The texts of the cached trees (a benchmark's reference parse)."""
        return [text for _, text in self._trees.values()]

    def clear(self) -> None:
        """Forget every parsed tree (benchmarks measure cold runs with this)."""
        self._trees.clear()
        self._chars = 0


_process_cache = TreeCache(MAX_CACHED_CHARS)
parse_file = _process_cache.parse
cached_texts = _process_cache.texts
clear_cache = _process_cache.clear


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic GC inside the block; nested or threaded use restores the state before the first."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class LineIndex:
    """Sorted line numbers where a regex matches the text; None when the text is not ASCII."""

    def __init__(self, text: str, pattern: re.Pattern[str]):
        self.lines: list[int] | None = None
        if text.isascii() and "\r" not in text:  # Python also ends lines at a lone \r: count no lines then
            self.lines = []
            starts = [0] + [m.end() for m in re.finditer("\n", text)]
            for match in pattern.finditer(text):
                self.lines.append(bisect.bisect_right(starts, match.start()))

    def may_contain(self, node: ast.AST) -> bool:
        """False only when no line of the node (decorators included) matches: then its subtree cannot."""
        if self.lines is None:
            return True
        first = getattr(node, "lineno", None)
        last = getattr(node, "end_lineno", None)
        if first is None or last is None:
            return True
        for decorator in getattr(node, "decorator_list", ()):
            first = min(first, decorator.lineno)
        at = bisect.bisect_left(self.lines, first)
        return at < len(self.lines) and self.lines[at] <= last
