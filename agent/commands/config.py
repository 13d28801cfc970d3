"""``dsv4-agent config allow|deny [FILE]``: let the ``dsv4-agent.toml`` of a folder be read, or a run folder
give back its programs, hosts and endpoints (docs/config.md)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from agent.commands.params import Arg, fail
from agent.settings.config_file import ConfigFileError
from agent.settings.config_file import allow as record_allowed
from agent.settings.config_file import deny as forget
from agent.settings.model import Settings
from agent.settings.of_run import user_only_fields
from agent.settings.recorded import allow_run, deny_run
from agent.terminal.printable import echo
from tools.base import ToolError

File = Annotated[str, Arg(metavar="FILE", help="The settings file [./dsv4-agent.toml], or a run folder.")]


def _runs_or_trusts() -> set[str]:
    """Settings that run programs, send the key, or widen trust, and the host paths (their fields say so):
    what a reader of the file must look at."""
    return set(Settings.marked("user_only")) | set(Settings.marked("host_path"))


def allow(file: File = "dsv4-agent.toml") -> None:
    """Allow FILE as it is now: campaigns started in its folder read it until it changes. FILE may be a
    run folder (a bundle unpacked, a colleague's run): resume and replay --rerun then take back the
    programs, hosts, ssh options, endpoint and environment its config.json names, until it changes.

    Read it first: its settings can name programs the agent runs and where the LLM key goes. The
    file's SHA-256 is recorded in the agent's state folder (not in the repository). Exit 2 when it
    cannot be allowed (missing, another user's, writable by others, not valid settings).
    """
    if (Path(file) / "config.json").is_file():
        _allow_run(Path(file))
        return
    try:
        found, keys = record_allowed(Path(file), set(Settings.model_fields))
    except ConfigFileError as err:
        fail(str(err))
    watch = [k.replace("_", "-") for k in keys if k in _runs_or_trusts()]
    echo(f"allowed {found.path} (sha256 {found.sha256[:16]}); it sets {', '.join(k.replace('_', '-') for k in keys) or 'nothing'}")
    if watch:
        echo(f"it chooses what runs or is trusted: {', '.join(watch)}")


def _allow_run(run) -> None:
    try:
        recorded = json.loads((run / "config.json").read_text()).get("settings") or {}
        digest = allow_run(run)
    except (OSError, ValueError, AttributeError, ToolError) as err:
        fail(f"cannot allow run folder {run}: {err}; pass a run folder holding its config.json")
    chosen = [f"{k.replace('_', '-')} = {json.dumps(recorded[k])}" for k in user_only_fields() if k in recorded]
    echo(f"allowed run folder {run.resolve()} (config.json sha256 {digest[:16]}); it chooses what runs or is "
         f"trusted: {'; '.join(chosen) or 'nothing'}")


def deny(file: File = "dsv4-agent.toml") -> None:
    """Forget that FILE (or a run folder) was allowed: campaigns started in its folder refuse it again."""
    if (Path(file) / "config.json").is_file():
        echo(f"{'forgot' if deny_run(Path(file)) else 'was not allowed:'} run folder {Path(file).resolve()}")
        return
    try:
        forgotten = forget(Path(file))
    except ConfigFileError as err:
        fail(str(err))
    echo(f"{'forgot' if forgotten else 'was not allowed:'} {Path(file).resolve()}")
