"""The ``dsv4-agent`` console script.

Read-only forms (``--version``, every ``-h``, ``status``, ``runs``, ``jobs``) are answered by
agent/commands/quick.py without importing typer, the settings or the campaign; the rest goes to
agent/commands/main.py. Both take the commands from agent/commands/command_table.py. ``agent.commands.cli.app`` is that command line, imported on first use.
"""
from __future__ import annotations

import sys


def main() -> None:
    from agent.commands.quick import answer

    code = answer(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from agent.commands.main import main as whole

    whole()


def __getattr__(name: str):
    if name in ("app", "GoalFirstGroup"):
        from agent.commands import main as whole

        return getattr(whole, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
