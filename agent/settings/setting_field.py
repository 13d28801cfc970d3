"""A setting's field: its option, and the marks that say what the setting is (as SGLang keeps its arguments')."""
from __future__ import annotations

from typing import Any

from pydantic import Field


def setting(default: Any, help: str, flag: str | None = None, metavar: str | None = None, group: str | None = None,
            *, repeat: bool = False, aliases: tuple[str, ...] = (), shown: object = None, factory=None,
            user_only: str | None = None, host_path: int | None = None, compared: bool = True, **bounds: Any) -> Any:
    """A field and its option. The help shows ``[default]`` by itself, ``shown`` where the value is worked out
    later; ``repeat``: one option per entry; ``flag=None``: config file and environment only. Marks, read back
    with ``Settings.marked``: ``user_only``, what the value names (a program, a host): a run folder gives it back
    only where it is the user's own or allowed (agent/settings/of_run.py); ``host_path``, a path on the jobs' host
    that a resume elsewhere gives anew, ranked as a refusal asks for them; ``compared=False``: no difference of it
    is shown when two runs are compared."""
    extra = {"flag": flag, "metavar": metavar, "group": group, "repeat": repeat, "aliases": list(aliases),
             "shown": None if shown is None else str(shown), "user_only": user_only, "host_path": host_path,
             "compared": compared}
    if factory is not None:
        return Field(default_factory=factory, description=help, json_schema_extra=extra, **bounds)
    return Field(default, description=help, json_schema_extra=extra, **bounds)
