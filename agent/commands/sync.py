"""``dsv4-agent sync``: fast-forward the SGLang checkout and report what changed for the model."""
from __future__ import annotations

from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command(help=(
        "Fast-forward the SGLang git checkout from its upstream and report what matters for the target "
        "model: new commits, moved dependency pins (with the reinstall command for the SGLang "
        "environment), changed hooks/tests/kernels/benchmark client, and how the MTP recommendation "
        "changed. Never resets, stashes, rebases or forces; a dirty or diverged checkout is refused "
        "with what to do. Exit status: 0 synced, 1 refused or failed, 2 bad settings."))
    def sync(
        sglang: Optional[str] = typer.Option(None, "--sglang", help="SGLang git checkout [setting sglang_src]."),
        remote: Optional[str] = typer.Option(None, help="Remote to fetch from [origin]."),
        branch: Optional[str] = typer.Option(None, help="Upstream branch the checkout tracks [main]."),
        allow_dirty: Optional[bool] = typer.Option(
            None, "--allow-dirty", help="Pull despite local changes the incoming commits do not touch."),
        model: Optional[str] = typer.Option(None, help="Target model id or path [deepseek-ai/DeepSeek-V4-Flash]."),
        model_path: Optional[str] = typer.Option(None, help="Local checkpoint folder with config.json."),
        sglang_python: Optional[str] = typer.Option(None, help="Interpreter with SGLang, for the reinstall command."),
        previous: Optional[str] = typer.Option(
            None, "--previous", help="mtp.json of an earlier run to diff the recommendation against "
                                     "[the evidence on the checkout before pulling]."),
        fetch_timeout: float = typer.Option(120.0, help="Seconds before a silent remote counts as down."),
        as_json: bool = typer.Option(False, "--json", help="Print the full result as JSON."),
    ) -> None:
        from agent.config import SettingsError, load_settings
        from tools.base import ToolError
        from tools.sync.markdown import render_markdown
        from tools.sync.upstream import SyncArgs, sync_upstream

        try:
            settings = load_settings(dict(sglang_src=sglang, remote=remote, branch=branch, allow_dirty=allow_dirty,
                                          model=model, model_path=model_path, sglang_python=sglang_python))
        except SettingsError as err:
            typer.echo(f"dsv4-agent: {err}", err=True)
            raise typer.Exit(2)
        if not settings.sglang_src:
            typer.echo("dsv4-agent: sync needs an SGLang git checkout: pass --sglang PATH "
                       "(or set sglang_src in dsv4-agent.toml / DSV4_SGLANG_SRC)", err=True)
            raise typer.Exit(2)
        args = SyncArgs(sglang=settings.sglang_src, remote=settings.remote, branch=settings.branch,
                        allow_dirty=settings.allow_dirty, model=settings.model, model_path=settings.model_path,
                        sglang_python=settings.sglang_python, previous_answer=previous,
                        fetch_timeout_s=fetch_timeout)
        try:
            result = sync_upstream(args)
        except ToolError as err:
            typer.echo(f"dsv4-agent: sync refused: {err}", err=True)
            raise typer.Exit(1)
        typer.echo(result.model_dump_json(indent=2) if as_json else render_markdown(result))
