"""GitPython whose git processes get the allow-listed environment (``git_env``), never the LLM key.

GitPython builds each git's environment from ``os.environ``; the call it starts processes through
(``git.cmd.safer_popen``) is wrapped here, and its import-time ``git version`` is held back until
then. Modules import GitPython from here. What git gets and why: docs/config.md.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from tools.child_env import KEY_VARIABLES, NEVER, child_env

GIT_NAMES = frozenset({"DBUS_SESSION_BUS_ADDRESS"})
GIT_PREFIXES = ("GCM_",)
_NO_GIT = "/nonexistent/dsv4-agent/git-before-wrapping"


def git_env(built: Mapping[str, str]) -> dict[str, str]:
    """The environment of a git process, from the one GitPython built for it."""
    env = child_env(base=built)
    keys = {built[name] for name in KEY_VARIABLES if built.get(name)}
    env.update({k: v for k, v in built.items()
                if (k in GIT_NAMES or k.startswith(GIT_PREFIXES)) and k not in NEVER and v not in keys})
    return env


def _import_unrefreshed():
    """``import git`` without its import-time ``git version`` starting anything."""
    if "git" in sys.modules:
        return sys.modules["git"], False
    saved = {name: os.environ.get(name) for name in ("GIT_PYTHON_GIT_EXECUTABLE", "GIT_PYTHON_REFRESH")}
    os.environ.update(GIT_PYTHON_GIT_EXECUTABLE=_NO_GIT, GIT_PYTHON_REFRESH="quiet")
    try:
        import git as module
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return module, True


def _wrap(module) -> None:
    popen = module.cmd.safer_popen
    if getattr(popen, "allow_listed", False):
        return

    def allow_listed_popen(*args, env=None, **kwargs):
        return popen(*args, env=git_env(os.environ if env is None else env), **kwargs)

    allow_listed_popen.allow_listed = True  # type: ignore[attr-defined]
    module.cmd.safer_popen = allow_listed_popen
    module.index.fun.safer_popen = allow_listed_popen  # the hooks of index.commit, imported by name there


git, _refresh = _import_unrefreshed()
if not (hasattr(git.cmd, "safer_popen") and hasattr(git.index.fun, "safer_popen")):  # pragma: no cover - a GitPython that starts git another way
    raise ImportError("this GitPython starts git without git.cmd.safer_popen; dsv4-agent cannot give its git "
                      "processes the allow-listed environment (pin GitPython 3.1.41 or later, before 4)")
_wrap(git)
if _refresh:
    git.refresh()  # the import's `git version`, now through the wrapped call
