"""``dsv4-agent sync``: fast-forward the SGLang checkout and report what changed for the model."""
from __future__ import annotations

from typing import Annotated, Optional

from agent.exit_codes import ExitCode
from agent.commands.campaign import ConfigFile
from agent.commands.options import flag_names, pick, with_options
from agent.commands.params import JsonFlag, Opt, fail
from agent.settings.layers import SettingsError, load_settings
from agent.terminal.printable import echo
from tools.base import ToolError
from tools.sync.markdown import render_markdown
from tools.sync.upstream import SyncArgs, sync_upstream

SYNC_OPTIONS = pick("sglang_src", "remote", "branch", "allow_dirty", "model", "model_path", "sglang_python",
                    sglang_src="SGLang git checkout [setting sglang_src].",
                    allow_dirty="Pull despite local changes the incoming commits do not touch.",
                    sglang_python="Interpreter with SGLang, for the reinstall command.")
Previous = Annotated[Optional[str], Opt(
    "--previous", metavar="MTP_JSON", help="mtp.json of an earlier run to diff the recommendation against "
                                           "[the evidence on the checkout before pulling].")]
FetchTimeout = Annotated[float, Opt("--fetch-timeout", metavar="SECONDS",
                                             help="Seconds before a silent remote counts as down.")]


@with_options(SYNC_OPTIONS)
def sync(previous: Previous = None, fetch_timeout: FetchTimeout = 120.0, config: ConfigFile = None,
         as_json: JsonFlag = False, **settings) -> None:
    """Fast-forward the SGLang git checkout from its upstream and report what matters for the target model.

    New commits, moved dependency pins (with the reinstall command for the SGLang environment),
    changed hooks/tests/kernels/benchmark client, and how the MTP recommendation changed. Never
    resets, stashes, rebases or forces; a dirty or diverged checkout is refused with what to do.
    Exit 0 synced, 1 refused or failed, 2 bad settings.
    """
    try:
        chosen = load_settings(settings, config=config, flags=flag_names(SYNC_OPTIONS))
    except SettingsError as err:
        fail(str(err))
    if not chosen.sglang_src:
        fail("sync needs an SGLang git checkout: pass --sglang PATH "
             "(or set sglang_src in dsv4-agent.toml / DSV4_SGLANG_SRC)")
    args = SyncArgs(sglang=chosen.sglang_src, remote=chosen.remote, branch=chosen.branch,
                    allow_dirty=chosen.allow_dirty, model=chosen.model, model_path=chosen.model_path,
                    sglang_python=chosen.sglang_python, previous_answer=previous, fetch_timeout_s=fetch_timeout)
    try:
        result = sync_upstream(args)
    except ToolError as err:
        fail(f"sync refused: {err}", ExitCode.FAILED)
    echo(f"dsv4-agent: {chosen.config_note()}", err=True)  # a refusal stays one line; it names the cause
    echo(result.model_dump_json(indent=2) if as_json else render_markdown(result))
