"""``dsv4-agent tuning ...``: undo a run's kernel-config install, prove it was loaded, show shapes and a GPU plan."""
from __future__ import annotations

from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    tuning = typer.Typer(help="FP8 block-GEMM kernel tuning: shapes, plan, prove, uninstall.", no_args_is_help=True,
                         rich_markup_mode=None)

    @tuning.command("uninstall")
    def uninstall(run: str = typer.Argument(..., help="Run folder (path, name under --runs-dir, or 'latest')"),
                  runs_dir: str = typer.Option("runs", help="Where run folders are"),
                  force: bool = typer.Option(False, help="Also restore files changed since the install")) -> None:
        """Restore SGLang's config folder exactly as it was before RUN installed tuned configs
        (on the GPU host when the run installed them there through its SSH executor)."""
        from agent.runfolder import RunFolder, RunFolderError
        from tools.base import ToolError
        from tools.tuning.install import MANIFEST, load_manifest, uninstall_configs

        try:
            folder = RunFolder.find(run, runs_dir)
            installed_by = load_manifest(folder.path / MANIFEST).installed_by
            if installed_by == "local":
                result = uninstall_configs(folder.path, force=force)
            else:
                result = _uninstall_on_host(folder, installed_by, force)
        except (RunFolderError, ToolError) as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(1)
        for path in result.restored:
            typer.echo(f"restored {path}")
        for path in result.removed:
            typer.echo(f"removed  {path}")
        for path in result.left_alone:
            typer.echo(f"left alone (changed since install) {path}")
        if result.note:
            typer.echo(result.note)
        raise typer.Exit(1 if result.left_alone else 0)

    @tuning.command("prove")
    def prove(run: str = typer.Argument(..., help="Run folder (path, name under --runs-dir, or 'latest')"),
              runs_dir: str = typer.Option("runs", help="Where run folders are")) -> None:
        """Say which configs RUN installed were loaded by its benchmark servers (from their logs)."""
        from agent.runfolder import RunFolder, RunFolderError
        from tools.base import ToolError
        from tools.tuning.prove import proof_section

        try:
            section = proof_section(RunFolder.find(run, runs_dir).path)
        except (RunFolderError, ToolError) as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(1)
        if section is None:
            typer.echo("this run installed no kernel configs: nothing to prove")
            raise typer.Exit(0)
        typer.echo(section[1])
        raise typer.Exit(0 if section[1].startswith("All ") else 1)

    @tuning.command("shapes")
    def shapes(model_path: Optional[str] = typer.Option(None, help="Checkpoint folder or config.json"),
               log: list[str] = typer.Option([], help="Server log to mine for default-config warnings"),
               shape: list[str] = typer.Option([], "--shape", help="A shape 'N,K' (repeatable)"),
               tp: int = typer.Option(1, help="Tensor-parallel size")) -> None:
        """List the FP8 block-GEMM shapes worth tuning and where each came from."""
        from tools.base import ToolError
        from tools.tuning.shapes import FindShapesArgs, find_shapes

        try:
            found = find_shapes(FindShapesArgs(shapes=shape, log_files=log, model_path=model_path, tp=tp))
        except ToolError as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(1)
        for line in found.derivation:
            typer.echo(line)
        for s in found.shapes:
            typer.echo(f"N={s.n} K={s.k} block=[{s.block_n}, {s.block_k}]  from {s.source}")
        if not found.shapes:
            typer.echo(found.note)

    @tuning.command("plan")
    def plan(shape: list[str] = typer.Option(..., "--shape", help="A shape 'N,K' (repeatable)"),
             gpus: int = typer.Option(8, help="Number of GPUs"),
             batch_size: list[int] = typer.Option([], "--batch-size", help="Batch sizes M (default: SGLang's list)")) -> None:
        """Show how (shape x batch size) units would be split over GPUs, longest first."""
        from tools.base import ToolError
        from tools.tuning.plan import PlanTuningArgs, plan_tuning

        try:
            args = PlanTuningArgs(shapes=shape, gpus=list(range(gpus)), **({"batch_sizes": batch_size} if batch_size else {}))
            result = plan_tuning(args)
        except ToolError as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(1)
        typer.echo(f"{result.total_units} units; estimated makespan / lower bound = {result.ratio:.3f}")
        for work in result.per_gpu:
            typer.echo(f"GPU {work.gpu}: {len(work.units)} units, est. cost {work.est_cost:.1f}")

    app.add_typer(tuning, name="tuning")


def _uninstall_on_host(folder, installed_by: str, force: bool):
    """Undo through the executor that installed (its ssh options as the run recorded them)."""
    from tools.base import ToolError
    from tools.jobs.factory import make_executor
    from tools.tuning.remote_install import uninstall_on_host

    settings = folder.read_json("config.json").get("settings", {})
    if settings.get("executor") != installed_by:
        raise ToolError(f"the configs were installed on {installed_by} but the run's executor is now "
                        f"{settings.get('executor')!r}; its ledger no longer reaches that host")
    executor = make_executor(installed_by, folder.jobs_dir, ssh_options=settings.get("ssh_options"))
    return uninstall_on_host(executor, folder.path, force=force)
