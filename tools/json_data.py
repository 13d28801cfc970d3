"""JSON read from files someone else may have written (run folders, ledgers).

``json.loads`` raises RecursionError for input nested past the recursion limit; here that is
``TooDeep``, a ``JSONDecodeError``, so every reader that handles bad JSON handles it too.
"""
from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any


class TooDeep(json.JSONDecodeError):
    """JSON nested too deeply to be data any of our writers made."""

    def __init__(self, where: object = None):
        super().__init__("nested too deeply to be data dsv4-agent wrote", "", 0)
        self.where = where

    def describe(self) -> str:
        what = f"{self.where}" if self.where is not None else "a JSON file this command read"
        return f"{what} is nested too deeply to be data dsv4-agent wrote; it was damaged or crafted: restore it or move it away"


def loads(text: str | bytes, where: object = None) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise TooDeep(where) from None


def read(path: Path | str) -> Any:
    """The JSON in the file at ``path`` (FileNotFoundError and UnicodeDecodeError as ``read_text``)."""
    return loads(read_text(path), path)


def open_regular(path: Path | str, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """A descriptor of the regular file at ``path``: a FIFO, device or socket someone placed there is
    refused (OSError EINVAL) instead of blocking the reader forever; opened without waiting for a writer."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or socket placed there)", str(path))
    os.set_blocking(fd, True)
    return fd


def read_text(path: Path | str) -> str:
    """``Path.read_text`` of a regular file only (``open_regular``)."""
    with open(open_regular(path), encoding="utf-8") as f:
        return f.read()


# A read-only file system, another user's file, a FIFO or link placed where a file is expected
_REFUSED = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ELOOP, errno.EINVAL)


def file_refusal(err: OSError) -> str | None:
    """The one line a command says for an OSError on a file it was given, or None (not such a refusal)."""
    if err.errno not in _REFUSED:
        return None
    return (f"{err.filename or 'a file'}: {err.strerror}; this command needs it as a regular file it may write: copy "
            "the run folder somewhere writable (`cp -r RUN DIR`) and use the copy, or remove what was placed there")
