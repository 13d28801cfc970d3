"""Every use of typer's private API, in one place (tests/test_typer_internals.py pins each).

Typer vendors click as ``typer._click`` and exports neither its usage errors (for our one-line
exit 2) nor its coercion classes (so ``--help`` imports no pydantic for boolean flags).
"""
from __future__ import annotations

from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
from typer._coercion import PassThroughRuntimeParam

__all__ = ["ClickException", "NoArgsIsHelpError", "UsageError", "plain_bool_flags"]


def plain_bool_flags(params: list) -> list:
    """Give boolean flags typer's pass-through coercion: they need no pydantic adapter, which typer
    would otherwise build (importing pydantic) even for ``--help``."""
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is not None and descriptor.annotation is bool and param._runtime_param is None:
            param._runtime_param = PassThroughRuntimeParam(parameter_info=descriptor.parameter_info, annotation=bool)
    return params
