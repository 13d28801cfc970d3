"""JSON read from files someone else may have written (run folders, ledgers).

``json.loads`` raises RecursionError for input nested past the recursion limit; here that is
``TooDeep``, a ``JSONDecodeError``, so every reader that handles bad JSON handles it too.
"""
from __future__ import annotations

import json
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
    return loads(Path(path).read_text(), path)
