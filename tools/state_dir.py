"""The agent's own folder outside every run folder and repository, for records that vouch for files
elsewhere: the repo-local config files the user allowed (``allowed/``) and the kernel configs the
agent installed (``installed/``).

``$DSV4_STATE_DIR``, else ``$XDG_STATE_HOME/dsv4-agent``, else ``~/.local/state/dsv4-agent``. A
record here is trusted because nobody but the user can write it: the folders are made 0700, and one
that another user owns or others may write is refused rather than believed.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from tools.base import ToolError


def state_root() -> Path:
    named = os.environ.get("DSV4_STATE_DIR")
    if named:
        return Path(named).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "dsv4-agent"


def _checked(folder: Path) -> Path:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode):
        raise ToolError(f"the agent's state folder {folder} is not a folder; remove it (or set DSV4_STATE_DIR)")
    if info.st_uid != os.getuid():
        raise ToolError(f"the agent's state folder {folder} belongs to uid {info.st_uid}, not you; its records "
                        "cannot be trusted: set DSV4_STATE_DIR to a folder of your own")
    if info.st_mode & 0o022:
        raise ToolError(f"the agent's state folder {folder} may be written by others (mode "
                        f"{stat.S_IMODE(info.st_mode):o}); `chmod go-w {folder}` (or set DSV4_STATE_DIR)")
    return folder


def state_dir(part: str) -> Path:
    """``<state root>/<part>``, made and checked to be the user's alone."""
    return _checked(_checked(state_root()) / part)
