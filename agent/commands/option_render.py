"""Builds ``option_table.py`` from the Settings fields (run ``python -m agent.commands.option_render``).

The command line must not import pydantic for ``--help`` (most of a ``--help``'s time would be
that import), so the options are read at run time from the generated, pydantic-free table, and
``tests/test_settings_table.py`` fails when the table no longer matches the fields.
"""
from __future__ import annotations

import sys
import types
import typing
from pathlib import Path

TABLE = Path(__file__).with_name("option_table.py")
HEADER = '''"""Generated from agent/settings/model.py:Settings by ``python -m agent.commands.option_render``; do not edit.

One row per option: field, flag, help (with the default), group, metavar, kind, min, aliases.
"""
ROWS = [
'''


def shown_default(field) -> str | None:
    """The default as the help shows it, ``None`` for none worth showing."""
    extra = field.json_schema_extra
    if extra["shown"] is not None:
        return extra["shown"]
    value = field.get_default(call_default_factory=True)
    if isinstance(value, bool):
        return ("" if value else "no-") + extra["flag"].split("/")[0].removeprefix("--") if "/" in extra["flag"] else None
    if value is None or value == []:
        return None
    if isinstance(value, list):
        return ",".join(map(str, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def with_default(help: str, default: str | None) -> str:
    if default is None:
        return help
    return f"{help[:-1]} [{default}]." if help.endswith(".") else f"{help} [{default}]"


def _kind(field) -> str:
    if field.json_schema_extra["repeat"]:
        return "list"
    annotation = field.annotation
    options = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) \
        else (annotation,)
    return next((a.__name__ for a in options if a in (bool, int, float)), "str")


def _min(field, kind: str) -> float | None:
    """Typer's inclusive bound from the field's ``ge`` (and a float's ``gt``, which the field then
    refuses itself); a whole number's ``gt`` is left to the field, whose message names the bound."""
    for bound in field.metadata:
        if getattr(bound, "ge", None) is not None:
            return bound.ge
        if getattr(bound, "gt", None) is not None and kind == "float":
            return bound.gt
    return None


def rows() -> list[tuple]:
    from agent.settings.model import Settings

    found = []
    for name, field in Settings.model_fields.items():
        extra = field.json_schema_extra
        if not extra["flag"]:
            continue
        kind = _kind(field)
        found.append((name, extra["flag"], with_default(field.description, shown_default(field)), extra["group"],
                      extra["metavar"], kind, _min(field, kind), tuple(extra["aliases"])))
    return found


def render() -> str:
    return HEADER + "".join(f"    {row!r},\n" for row in rows()) + "]\n"


if __name__ == "__main__":
    TABLE.write_text(render())
    sys.stdout.write(f"wrote {TABLE}\n")
