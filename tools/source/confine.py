"""The checks every read of the SGLang source makes: a path it was given must stay inside the source
root once ``..`` and symlinks are resolved (the LLM chooses such paths, and an absolute path or
``../..`` would otherwise read any file the agent can), and a file is read only when it is a
regular file under the size cap (``read_bounded``)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from tools.base import ToolError


def inside_root(root: Path | str, relative: str) -> Path:
    """``root / relative`` resolved, or ToolError when it leaves ``root``."""
    base = Path(root).resolve()
    target = (base / relative).resolve()
    if target != base and base not in target.parents:
        raise ToolError(f"{relative} is outside the SGLang source root; pass a path relative to {base}")
    return target


# Source files the evidence engine reads are bounded: SGLang's largest Python file is well under 1 MB,
# and a tree someone else controls may hold a 500 MB ".py" or a FIFO named like one.
MAX_FILE_BYTES = 4 * 1024 * 1024


def read_bounded(path: Path | str, cap: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``cap`` bytes; ValueError saying why otherwise. The file
    is opened without blocking (a FIFO would wait forever for a writer) and checked on what was opened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise ValueError(f"cannot be opened ({err.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file (a FIFO, device or socket): not read")
        if info.st_size > cap:
            raise ValueError(f"{info.st_size / 1e6:.0f} MB, over the {cap // (1024 * 1024)} MB cap per file: not read")
        data = handle.read(cap + 1)
    if len(data) > cap:  # grew while being read
        raise ValueError(f"over the {cap // (1024 * 1024)} MB cap per file: not read")
    return data


def outside(root: Path | str, path: Path | str) -> bool:
    """Whether ``path`` (a symlink, or a folder link above it, followed) lies outside ``root``."""
    base = Path(root).resolve()
    target = Path(path).resolve()
    return target != base and base not in target.parents
