"""The one finder of the ``sglang`` package folder in a tree (stdlib only).

A tree is a git checkout (``python/sglang/``), a folder holding the package (a wheel, a
site-packages), or the ``sglang/`` folder itself; the package is the folder with ``__init__.py``.
"""
from __future__ import annotations

from pathlib import Path


def find_package(path: Path | str) -> Path | None:
    """The ``sglang/`` package folder of the tree at ``path``; None when it holds none."""
    path = Path(path)
    for candidate in (path / "python" / "sglang", path / "sglang"):
        if (candidate / "__init__.py").is_file():
            return candidate
    return path if path.name == "sglang" and (path / "__init__.py").is_file() else None

