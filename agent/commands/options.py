"""The command-line options that set settings, built from the Settings fields (agent/settings/model.py).

Each ``SettingOption`` names the ``Settings`` field it sets, its flag, a metavar, a help line
(ending with the field's default) and a help panel, all taken from the field through the generated
``option_table.py``: the fields are the one table, and ``--help`` does not import pydantic to read
them. ``with_options`` adds options to a command's signature, so a command receives them as
``**settings`` keyword arguments named after the fields and hands them to ``load_settings`` as the
command-line layer.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from typing import Annotated, Any, Callable, Optional

from agent.commands.option_table import ROWS
from agent.commands.params import Opt

KINDS = {"str": str, "int": int, "float": float, "bool": bool, "list": list}


@dataclass(frozen=True)
class SettingOption:
    field: str                 # the Settings field this option sets
    flag: str                  # e.g. "--model-path"; a bool may be "--x/--no-x"
    help: str
    panel: str
    metavar: str | None = None  # None for flags
    kind: type = str           # str, int, float, bool, or list (repeatable)
    min: float | None = None
    aliases: tuple[str, ...] = ()  # more names for the same option, e.g. --dry-run for --plan-only
    required: bool = False     # a command that cannot do without it (``mtp --model``)

    def parameter(self) -> inspect.Parameter:
        annotation: Any = list[str] if self.kind is list else self.kind
        option = Opt(self.flag, *self.aliases, help=self.help, metavar=self.metavar, rich_help_panel=self.panel,
                              min=self.min, show_default=False)
        if self.required:
            return inspect.Parameter(self.field, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[annotation, option])
        return inspect.Parameter(self.field, inspect.Parameter.KEYWORD_ONLY, default=None,
                                 annotation=Annotated[Optional[annotation], option])

    def helped(self, text: str) -> "SettingOption":
        return replace(self, help=text)


OPTIONS: dict[str, SettingOption] = {
    field: SettingOption(field, flag, help, panel, metavar, KINDS[kind], min, aliases)
    for field, flag, help, panel, metavar, kind, min, aliases in ROWS}


def pick(*fields: str, required: tuple[str, ...] = (), **helps: str) -> list[SettingOption]:
    """Some of the table's options, optionally with another help line (``field=text``)."""
    chosen = [OPTIONS[f].helped(helps[f]) if f in helps else OPTIONS[f] for f in fields]
    return [replace(o, required=True) if o.field in required else o for o in chosen]


def flag_names(specs: list[SettingOption]) -> dict[str, str]:
    """Setting -> the option that sets it, for error messages."""
    return {s.field: s.flag.split("/")[0] for s in specs}


def with_options(specs: list[SettingOption]) -> Callable[[Callable], Callable]:
    """Give ``fn(…, **settings)`` one keyword option per spec, after its own parameters."""
    def decorate(fn: Callable) -> Callable:
        own = [p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.kind is not p.VAR_KEYWORD]
        fn.__signature__ = inspect.Signature([*own, *(s.parameter() for s in specs)])
        fn.setting_options = specs
        return fn
    return decorate
