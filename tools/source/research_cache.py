"""Research results kept between runs, addressed by the content of the source they were read from.

Reading SGLang's argument hooks and registered tests parses a few hundred files, and a campaign, its
resume, ``dsv4-agent mtp`` and the next campaign on the same commit read the same bytes. A result's
key: the Python version and a digest of the ``tools`` source (an edited extractor never meets an old
result); the tool and its arguments, paths relative to the source root; a digest of the *content*
of every ``.py`` file the work can read (the import root and its ``test/``: file times lie after
hard links, ``cp -p`` or unpacking).

A result is stored only when exact for its key: the import root holds no Python code but ``sglang``
(a site-packages reaches packages the digest does not read), the scope holds no symlink, and no
file was written during the work or within ``RACY_S`` before it was read.
``DSV4_RESEARCH_CACHE=off`` turns it off.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import stat
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

from pydantic import BaseModel, ValidationError

from tools.source.confine import MAX_FILE_BYTES, read_bounded
from tools.source.resolve import cache_dir

R = TypeVar("R", bound=BaseModel)

OFF_ENV = "DSV4_RESEARCH_CACHE"
RACY_S = 2.0          # file clocks tick coarsely (ext4: a few ms); a generous margin costs only a miss
MAX_ENTRIES = 256     # entries are 20-100 kB: the folder stays under ~25 MB
HASHED_TREES = 8      # digests this process remembers (a tree's stat data: ~1 MB per 5k files)
TOOLS_DIR = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, order=True)
class Stamp:
    """What stat says of one file: equal stamps on a settled file mean the bytes hashed are still there."""

    rel: str
    ino: int
    size: int
    mtime_ns: int


@dataclass
class CacheStats:
    """What this process's research asked of the cache (tests read it)."""

    hits: int = 0
    misses: int = 0
    stored: int = 0
    not_cacheable: int = 0
    last_reason: str = ""  # why the latest uncacheable scope was not cached


stats = CacheStats()


def enabled() -> bool:
    return os.environ.get(OFF_ENV, "").strip().lower() not in ("off", "0", "false", "no")


def folder() -> Path:
    return cache_dir() / "research"


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    h = hashlib.blake2b(sys.version.encode(), digest_size=20)
    for path in sorted(TOOLS_DIR.rglob("*.py")):
        h.update(path.relative_to(TOOLS_DIR).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


class ResearchScope:
    """The files one source tree's research can read, asked once or several times (``infer_mtp``
    asks twice), and what stat said of them when they were hashed."""

    def __init__(self, root: str | Path, package_dir: str | Path):
        self.root, self.package_dir = Path(root).resolve(), Path(package_dir).resolve()
        self.import_root = self.package_dir.parent
        tests = self.root / "test"
        self.folders = [self.import_root] + ([tests] if tests.is_dir() and not tests.is_relative_to(self.import_root)
                                             else [])
        self._digest: str | None = None
        self._stamps: list[Stamp] = []
        self._read_at = 0.0

    def covers(self, path: Path) -> bool:
        return any(path.resolve().is_relative_to(f) for f in self.folders)

    def cached(self, tool: str, args: BaseModel, result_type: type[R], compute: Callable[[], R]) -> R:
        if not enabled():
            return compute()
        try:
            why_not = self._reason_not_cacheable()
            digest = None if why_not else self._digest_once()
        except OSError:
            return compute()  # a missing or unreadable tree: the work itself says so, as it would uncached
        if digest is None:
            stats.not_cacheable += 1
            stats.last_reason = why_not or f"a symlink inside the scope of {self.root}"
            return compute()
        path = folder() / f"{tool}-{_key(tool, args, self, digest)}.json"
        with contextlib.suppress(OSError, ValidationError, ValueError):
            result = result_type.model_validate_json(path.read_bytes())
            stats.hits += 1
            return result
        stats.misses += 1
        result = compute()
        if self._unchanged_since_read():
            _store(path, result.model_dump_json())
            stats.stored += 1
        return result

    def _reason_not_cacheable(self) -> str | None:
        for entry in os.scandir(self.import_root):
            name = entry.name
            if entry.path == str(self.package_dir) or name.endswith((".dist-info", ".egg-info")):
                continue
            if name.endswith(".py") or (entry.is_dir() and any(Path(entry.path).rglob("*.py"))):
                return f"{self.import_root} holds Python code besides {self.package_dir.name}/ ({name})"
        return None

    def _digest_once(self) -> str | None:
        """Digest of every .py file in the scope; None when the scope holds a symlink. A second ask in
        this process whose stat data show no file written since the first (nor within RACY_S before
        it) takes the first one's digest."""
        if self._digest is None:
            read_at, stamps = time.time(), self._walk()
            if stamps is None:
                return None
            known = _hashed.get(self.import_root)
            if known is not None and known[0] == stamps and _settled(stamps, known[2]):
                self._stamps, self._digest, self._read_at = known
                return self._digest
            h = hashlib.blake2b(digest_size=20)
            for stamp in stamps:
                h.update(stamp.rel.encode() + b"\0" + _content_digest(self.root / stamp.rel, stamp))
            self._stamps, self._digest, self._read_at = stamps, h.hexdigest(), read_at
            _hashed.pop(self.import_root, None)
            _hashed[self.import_root] = (stamps, self._digest, read_at)
            while len(_hashed) > HASHED_TREES:  # a long-lived process (a test worker) meets many trees
                del _hashed[next(iter(_hashed))]
        return self._digest

    def _unchanged_since_read(self) -> bool:
        """Nothing written during the work, nor within RACY_S before the files were read."""
        return self._walk() == self._stamps and _settled(self._stamps, self._read_at)

    def _walk(self) -> list[Stamp] | None:
        stamps: list[Stamp] = []
        pending = list(self.folders)
        while pending:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        return None
                    if entry.is_dir():
                        if entry.name not in ("__pycache__", ".git"):
                            pending.append(Path(entry.path))
                    elif entry.name.endswith(".py"):
                        st = entry.stat(follow_symlinks=False)
                        size = st.st_size if stat.S_ISREG(st.st_mode) else -1  # a FIFO is never opened here
                        stamps.append(Stamp(Path(entry.path).relative_to(self.root).as_posix(), st.st_ino,
                                            size, st.st_mtime_ns))
        return sorted(stamps)


def _content_digest(path: Path, stamp: Stamp) -> bytes:
    """A file's part of the scope's digest: its content, or for what the reading itself skips (not a
    regular file, over the size cap) what stat says of it, so that a change to it still changes the key."""
    if stamp.size >= 0 and stamp.size <= MAX_FILE_BYTES:
        with contextlib.suppress(ValueError):
            return hashlib.blake2b(read_bounded(path), digest_size=20).digest()
    return f"skipped {stamp.size} {stamp.mtime_ns}".encode()


# this process's latest digests: import root -> (stat data when hashed, digest, when)
_hashed: dict[Path, tuple[list[Stamp], str, float]] = {}


def _settled(stamps: list[Stamp], read_at: float) -> bool:
    oldest_trusted = (read_at - RACY_S) * 1e9
    return all(s.mtime_ns < oldest_trusted for s in stamps)


def _key(tool: str, args: BaseModel, scope: ResearchScope, digest: str) -> str:
    fields = args.model_dump(mode="json")
    fields.pop("root", None)
    fields["package_dir"] = os.path.relpath(scope.package_dir, scope.root)
    h = hashlib.blake2b(digest_size=20)
    for part in (code_digest(), tool, repr(sorted(fields.items())), digest):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def _store(path: Path, text: str) -> None:
    """Write whole or not at all (temp file + rename), then keep the newest MAX_ENTRIES."""
    with contextlib.suppress(OSError):  # a read-only or full cache costs only the next run's time
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as out:
                out.write(text)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        entries = sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in entries[MAX_ENTRIES:]:
            with contextlib.suppress(FileNotFoundError):
                old.unlink()
