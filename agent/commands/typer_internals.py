"""Every use of typer's private API, in one place (tests/test_typer_internals.py pins each).

Typer 0.2x vendors click as ``typer._click`` and exports neither its usage errors nor its coercion
classes. The CLI needs both: the errors to print one line and exit 2 instead of click's box, and
the coercion to keep ``--help`` from importing pydantic for boolean flags. A typer upgrade that
moves them fails the pinning test, not a command.
"""
from __future__ import annotations

from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
from typer._coercion import PassThroughRuntimeParam

__all__ = ["ClickException", "NoArgsIsHelpError", "UsageError", "plain_bool_flags"]


def plain_bool_flags(params: list) -> list:
    """Typer builds a pydantic adapter to coerce even ``--help`` (most of a ``--help``'s time is
    importing pydantic for it); a boolean flag needs none, so it gets typer's pass-through."""
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is not None and descriptor.annotation is bool and param._runtime_param is None:
            param._runtime_param = PassThroughRuntimeParam(parameter_info=descriptor.parameter_info, annotation=bool)
    return params
