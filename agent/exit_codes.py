"""Every exit code, one meaning each, and the code each run status ends with (stdlib only: the
console script's first module, agent/commands/quick.py, imports it)."""
from __future__ import annotations

from enum import IntEnum, unique
from typing import Literal, get_args


@unique  # one meaning per code
class ExitCode(IntEnum):
    DONE = 0
    FAILED = 1  # or refused: a replay that diverged, a hand-off held for review; the message says why
    USAGE = 2  # bad input
    BUDGET_EXHAUSTED = 3  # an LLM campaign's
    CUT_SHORT = 4  # a replay's trace, reproduced up to its last good event
    INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it
    PIPE_CLOSED = 141  # 128 + SIGPIPE: the reader of stdout went away


RunStatus = Literal["finished", "planned", "failed", "interrupted", "budget_exhausted"]  # docs/formats.md
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
DONE_STATUSES = ("finished", "planned")


def exit_code_of(status: RunStatus) -> ExitCode:
    """The code a campaign that ended ``status`` exits with: DONE, else the code of the same name."""
    return ExitCode.DONE if status in DONE_STATUSES else ExitCode[status.upper()]
