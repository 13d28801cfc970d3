"""Every command of ``dsv4-agent``: its words, the function that runs it and the heading ``--help`` lists it
under, read by agent/commands/main.py (the whole command line, built from it) and agent/commands/quick.py
(the read-only answers, parsed from the same functions' parameters).

A command's module is imported only when that command runs or its help is rendered, so a module
imports what its commands need at its top.
"""
from __future__ import annotations

import importlib

CAMPAIGN, INSPECT, PARTS = "Campaigns", "Runs", "Evidence and tools"

# (words, "module:function" under agent/commands/, heading); the order is the order in --help. A command
# group's own line names its help instead of a function; its commands follow with the group's words first.
COMMANDS: list[tuple[tuple[str, ...], str, str | None]] = [
    (("run",), "campaign:run", CAMPAIGN),
    (("resume",), "campaign:resume", CAMPAIGN),
    (("bundle",), "campaign:bundle", CAMPAIGN),
    (("status",), "runs:status", INSPECT),
    (("jobs",), "jobs:jobs", INSPECT),
    (("runs",), "runs:runs", INSPECT),
    (("report",), "report:report", INSPECT),
    (("compare",), "report:compare", INSPECT),
    (("replay",), "replay:replay", INSPECT),
    (("mtp",), "mtp:mtp", PARTS),
    (("sync",), "upstream:sync", PARTS),
    (("tuning",), "FP8 block-GEMM kernel tuning: shapes, plan, prove, uninstall.", PARTS),
    (("tuning", "uninstall"), "tuning:uninstall", None),
    (("tuning", "prove"), "tuning:prove", None),
    (("tuning", "shapes"), "tuning:shapes", None),
    (("tuning", "plan"), "tuning:plan", None),
    (("config",), "Allow or forget a folder's dsv4-agent.toml or a run folder (see docs/config.md).", PARTS),
    (("config", "allow"), "config:allow", None),
    (("config", "deny"), "config:deny", None),
]
# Asked far more often than campaigns run: agent/commands/quick.py answers them without typer (calling the same
# function) when their words parse; their modules import no typer, nor pydantic for a look at a run
WITHOUT_TYPER = frozenset({("status",), ("runs",), ("jobs",)})

GROUPS = frozenset(words for words, *_ in COMMANDS if any(w[:-1] == words for w, *_ in COMMANDS))
# Every command whose ``-h`` is answered (the root's too)
HELP_PATHS = frozenset({(), *(words for words, *_ in COMMANDS)})


def command_function(words: tuple[str, ...]):
    """The function that runs a command, its module imported now."""
    where = next(target for w, target, _panel in COMMANDS if w == words)
    module, name = where.split(":")
    return getattr(importlib.import_module(f"agent.commands.{module}"), name)


def group_help(words: tuple[str, ...]) -> str:
    return next(target for w, target, _panel in COMMANDS if w == words)
