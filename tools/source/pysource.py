"""Parsed Python source for the evidence engine: one parse per file content per process, cheap text prefilters.

Why this exists (profiled on the sglang 0.5.23 wheel, 2 cores): an ``mtp`` inference parses ~150
files and then walks their trees many times. Two costs dominated besides ``ast.parse`` itself:
the cyclic garbage collector, which re-traverses every AST node already held each time a parse
allocates another few hundred thousand nodes (about half the wall time), and ``ast.walk`` over
whole methods just to learn that they contain no call of interest.

- ``parse_file`` caches ``ast.Module`` per file *content* (a digest of the bytes, not mtime: a
  file rewritten within one clock tick with the same size must not hit a stale tree). Trees are
  shared, so callers must treat them as read-only (nothing in the engine mutates nodes).
- ``gc_paused`` turns the cyclic collector off around parse-heavy work. ASTs hold no reference
  cycles, so reference counting frees them; the collector's state is restored afterwards.
- ``LineIndex`` answers "can a node spanning lines a..b contain this identifier?" from the text.
  It is only a necessary condition (callers still walk the tree when it says yes), and it
  declines (``None`` lines) for non-ASCII source, where identifier normalisation (NFKC) could make
  the AST name differ from the text, and for text with ``\r`` line ends, where line counts could.
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

# Trees cost ~30 bytes of memory per source character: an inference parses 2.8 M characters on the
# 0.5.23 wheel, 2.9 M on a checkout with registered tests (~90 MB of trees), and a checkout that has
# grown to four times that must still fit, or a second inference (sync, a campaign) parses it all
# again. The bound: 16 M characters, about 480 MB of trees at most.
MAX_CACHED_CHARS = 16_000_000


class TreeCache:
    """Parsed trees keyed by a digest of the file's bytes, least recently used dropped past max_chars."""

    def __init__(self, max_chars: int):
        self.max_chars = max_chars
        self._trees: OrderedDict[bytes, tuple[ast.Module, str]] = OrderedDict()
        self._chars = 0

    def parse(self, path: Path) -> tuple[ast.Module, str]:
        """(tree, text) of a Python file; raises OSError / SyntaxError / ValueError like ``ast.parse``
        (ValueError also for a file that is not regular or is over the cap: ``confine.read_bounded``)."""
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
        """The texts of the cached trees (benchmarks time a plain ``ast.parse`` of them as a reference)."""
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
    """No cyclic GC inside the block. Nested or concurrent use (threads) is fine: only a block that
    found the collector on turns it back on, so it ends in the state it had before the first one."""
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
