"""The one check every read tool makes before it opens a path it was given: the path must stay
inside the SGLang source root once ``..`` and symlinks are resolved (the LLM chooses such paths,
and an absolute path or ``../..`` would otherwise read any file the agent can)."""
from __future__ import annotations

from pathlib import Path

from tools.base import ToolError


def inside_root(root: Path | str, relative: str) -> Path:
    """``root / relative`` resolved, or ToolError when it leaves ``root``."""
    base = Path(root).resolve()
    target = (base / relative).resolve()
    if target != base and base not in target.parents:
        raise ToolError(f"{relative} is outside the SGLang source root; pass a path relative to {base}")
    return target
