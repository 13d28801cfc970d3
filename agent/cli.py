"""The ``dsv4-agent`` console script.

What only reads — ``--version``, ``-h``, ``status``, ``runs`` and the listing form of ``jobs`` —
is answered by agent/quick.py without importing the command-line framework, the settings or the
campaign; everything else, and every form quick.py does not know (help of a subcommand, a bad
option, a missing argument), goes to the whole command line in agent/commands/main.py, which
gives the same answer and every error message. ``agent.cli.app`` is that command line (tests run
it in process), imported on first use.
"""
from __future__ import annotations

import sys


def main() -> None:
    from agent.quick import answer

    code = answer(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from agent.commands.main import main as whole

    whole()


def __getattr__(name: str):
    if name in ("app", "COMMANDS", "GoalFirstGroup"):
        from agent.commands import main as whole

        return getattr(whole, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
