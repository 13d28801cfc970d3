"""Server flags and environment the user adds to every serve script (``--server-arg``, ``--server-env``).

An entry of ``--server-arg`` is split the way a shell would (``"--mem-fraction-static 0.8"``, or
several flags in one entry); each flag takes the words up to the next ``--flag`` as its value.
They go through the same trust review as a recipe's flags (tools/scripts/trust.py): a flag that
widens trust needs ``--allow-flag`` even when the user typed it, so a config file copied from
elsewhere cannot switch on remote code quietly. Flags the scripts set themselves and the
speculative flags the campaign varies are refused: a second value would disagree with the first.
"""
from __future__ import annotations

import shlex

from pydantic import ValidationError

from tools.scripts.models import MEASURE_FLAGS, RESERVED_FLAGS, EnvChoice, FlagChoice
from tools.scripts.trust import held_back

SERVER_ARG_SOURCE = "user choice (--server-arg)"
SERVER_ENV_SOURCE = "user choice (--server-env)"
# Set per variant by the campaign (tools/mtp/variants.py); a user's value would hide what was measured.
CAMPAIGN_PREFIX = "--speculative-"


def _no_line_breaks(entry: str, option: str) -> None:
    if "\n" in entry or "\r" in entry:
        raise ValueError(f"{entry!r} holds a line break; give each {option} entry on one line")


def parse_server_args(entries: list[str], allowed: list[str] | tuple[str, ...] = ()) -> list[FlagChoice]:
    """The flags of every entry, in order; ``ValueError`` naming the entry and the fix (the caller names the option)."""
    choices: list[FlagChoice] = []
    for entry in entries:
        _no_line_breaks(entry, "--server-arg")
        try:
            words = shlex.split(entry)
        except ValueError as err:
            raise ValueError(f"{entry!r} is not valid shell words ({err}); quote it as a shell would") from None
        if not words or not words[0].startswith("--"):
            raise ValueError(f"{entry!r} must start with a flag, e.g. --server-arg '--mem-fraction-static 0.8'")
        flag, value = words[0], []
        for word in [*words[1:], None]:
            if word is None or (word.startswith("--") and len(word) > 2):
                choices.append(_checked(flag, " ".join(value), allowed))
                flag, value = word, []
            else:
                value.append(word)
    return choices


def _checked(flag: str, value: str, allowed: list[str] | tuple[str, ...]) -> FlagChoice:
    if flag in RESERVED_FLAGS or flag in MEASURE_FLAGS:
        raise ValueError(f"{flag} is set by the scripts themselves; drop it "
                         "(the model, port and TP come from --model-path, the script's PORT and --tp)")
    if flag.startswith(CAMPAIGN_PREFIX):
        raise ValueError(f"{flag} is what the campaign varies; ask for a setting with --mtp-steps instead")
    why = held_back(flag, value, allowed)
    if why:
        raise ValueError(why)
    try:
        return FlagChoice(flag=flag, value=value, source=SERVER_ARG_SOURCE)
    except ValidationError as err:
        raise ValueError(f"{flag!r}: {err.errors()[0]['msg'].removeprefix('Value error, ')}") from None


def parse_server_env(entries: list[str]) -> list[EnvChoice]:
    """``NAME=VALUE`` entries as environment choices; ``ValueError`` naming the entry and the fix."""
    choices: list[EnvChoice] = []
    for entry in entries:
        _no_line_breaks(entry, "--server-env")
        name, sep, value = entry.partition("=")
        if not sep:
            raise ValueError(f"{entry!r} must be NAME=VALUE, e.g. --server-env SGLANG_USE_CPU_ENGINE=1")
        try:
            choices.append(EnvChoice(name=name, value=value, source=SERVER_ENV_SOURCE))
        except ValidationError:
            raise ValueError(f"{entry!r}: {name!r} is not a valid environment variable name "
                             "(letters, digits and '_', not starting with a digit)") from None
    return choices
