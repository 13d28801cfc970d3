"""``dsv4-agent config allow|deny [FILE]``: let the ``dsv4-agent.toml`` of a folder be read (docs/config.md)."""
from __future__ import annotations

from typing import Annotated

import typer

from agent.commands.shared import Command, fail, sub_app
from agent.terminal.printable import echo

config = sub_app("Allow or forget a folder's dsv4-agent.toml (read only once allowed; see docs/config.md).")
File = Annotated[str, typer.Argument(metavar="FILE", help="The settings file [./dsv4-agent.toml].")]
# Settings that run programs, send the key, or widen trust: what a reader of the file must look at.
RUNS_OR_TRUSTS = ("sglang_python", "nvidia_smi", "ssh_options", "executor", "llm_base_url", "allow_flags",
                  "sglang_src", "accuracy_data", "tokenizer", "model_path")


@config.command("allow", cls=Command)
def allow(file: File = "dsv4-agent.toml") -> None:
    """Allow FILE as it is now: campaigns started in its folder read it until it changes.

    Read it first: its settings can name programs the agent runs and where the LLM key goes. The
    file's SHA-256 is recorded in the agent's state folder (not in the repository). Exit 2 when it
    cannot be allowed (missing, another user's, writable by others, not valid settings).
    """
    from pathlib import Path

    from agent.settings.model import Settings
    from agent.settings.config_file import ConfigFileError, allow as record_allowed

    try:
        found, keys = record_allowed(Path(file), set(Settings.model_fields))
    except ConfigFileError as err:
        fail(str(err))
    watch = [k.replace("_", "-") for k in keys if k in RUNS_OR_TRUSTS]
    echo(f"allowed {found.path} (sha256 {found.sha256[:16]}); it sets {', '.join(k.replace('_', '-') for k in keys) or 'nothing'}")
    if watch:
        echo(f"it chooses what runs or is trusted: {', '.join(watch)}")


@config.command("deny", cls=Command)
def deny(file: File = "dsv4-agent.toml") -> None:
    """Forget that FILE was allowed: campaigns started in its folder refuse it again."""
    from pathlib import Path

    from agent.settings.config_file import ConfigFileError, deny as forget

    try:
        forgotten = forget(Path(file))
    except ConfigFileError as err:
        fail(str(err))
    echo(f"{'forgot' if forgotten else 'was not allowed:'} {Path(file).resolve()}")
