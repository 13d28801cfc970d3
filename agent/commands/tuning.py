"""``dsv4-agent tuning ...``: undo a run's kernel-config install, prove it was loaded, show shapes and a GPU plan."""
from __future__ import annotations

from typing import Annotated, Optional

from agent.exit_codes import ExitCode
from agent.commands.params import Ended, JsonFlag, Opt, RunRef, RunsDir, fail, find_run
from agent.report.sections import proof_section
from agent.settings.recorded import CampaignError
from agent.settings.run_reach import reach_of_run
from agent.terminal.printable import echo, outage_wait
from tools.base import ToolError
from tools.defaults import ASSUMED_TARGET_GPUS
from tools.jobs.factory import make_executor
from tools.tuning.install import MANIFEST, load_manifest, uninstall_configs
from tools.tuning.plan import PlanTuningArgs, plan_tuning
from tools.tuning.prove import prove_run
from tools.tuning.remote_install import uninstall_on_host
from tools.tuning.shapes import FindShapesArgs, find_shapes

Force = Annotated[bool, Opt("--force", help="Also restore files changed since the install.")]
SshOption = Annotated[Optional[list[str]], Opt(
    "--ssh-option", metavar="ARG", help="ssh argument for an install on an ssh:// host (repeat); a run folder's "
                                        "own only once allowed (runs you made are).")]
ExecutorOption = Annotated[Optional[str], Opt(
    "--executor", metavar="WHERE", help="The ssh:// host the run installed on; a run folder's own only once "
                                        "allowed (runs you made are).")]


def uninstall(run: RunRef, runs_dir: RunsDir = "runs", force: Force = False, executor_given: ExecutorOption = None,
              ssh_option: SshOption = None, as_json: JsonFlag = False) -> None:
    """Restore SGLang's config folder exactly as it was before RUN installed tuned configs.

    On the GPU host when the run installed them there through its SSH executor. Runs that installed
    the same configs may be uninstalled in any order. Exit 1 when a file was left alone.
    """
    folder = find_run(run, runs_dir)
    try:
        installed_by = load_manifest(folder.path / MANIFEST).installed_by
        if installed_by == "local":
            result = uninstall_configs(folder.path, force=force)
        else:
            result = _uninstall_on_host(folder, installed_by, force, executor_given, ssh_option)
    except CampaignError as err:
        fail(str(err))
    except ToolError as err:
        fail(str(err), ExitCode.FAILED)
    if as_json:
        print(result.model_dump_json(indent=2))
        raise Ended(ExitCode.FAILED if result.left_alone or result.not_ours else 0)
    for path in result.restored:
        echo(f"restored {path}")
    for path in result.removed:
        echo(f"removed  {path}")
    for path in result.released:
        echo(f"kept (a later run's install) {path}")
    for path in result.left_alone:
        echo(f"left alone (changed since install) {path}")
    for path in result.not_ours:
        echo(f"left alone (no record of ours) {path}")
    if result.note:
        echo(result.note)
    raise Ended(ExitCode.FAILED if result.left_alone or result.not_ours else 0)


def prove(run: RunRef, runs_dir: RunsDir = "runs", as_json: JsonFlag = False) -> None:
    """Say which configs RUN installed were loaded by its benchmark servers (from their logs).

    Exit 0 when all were loaded (or none were installed), 1 otherwise.
    """
    path = find_run(run, runs_dir).path
    try:
        proof = prove_run(path)
    except ToolError as err:
        fail(str(err), ExitCode.FAILED)
    if proof is None:
        echo("null" if as_json else "this run installed no kernel configs: nothing to prove")
        raise Ended(0)
    echo(proof.model_dump_json(indent=2) if as_json else proof_section(proof, path).markdown())
    raise Ended(0 if proof.all_loaded else ExitCode.FAILED)


ModelPath = Annotated[Optional[str], Opt("--model-path", metavar="PATH",
                                                  help="Checkpoint folder or its config.json.")]
Logs = Annotated[Optional[list[str]], Opt("--log", metavar="FILE",
                                                   help="Server log to mine for default-config warnings (repeat).")]
Shapes = Annotated[Optional[list[str]], Opt("--shapes", metavar="N,K", help="A shape (repeat).")]
Tp = Annotated[int, Opt("--tp", metavar="N", min=1, max=4096, help="Tensor-parallel size.")]


Drafters = Annotated[Optional[list[str]], Opt(
    "--drafter", metavar="mtp_head|dspark|none",
    help="Drafter whose GEMMs to add (repeat) [from the config: dspark_* keys -> dspark, else an MTP head].")]


def _drafters(values: list[str] | None) -> list | None:
    if not values:
        return None
    wrong = [v for v in values if v not in ("mtp_head", "dspark", "none")]
    if wrong:
        fail(f"--drafter {wrong[0]!r} is not one of mtp_head, dspark, none")
    return [v for v in dict.fromkeys(values) if v != "none"]


def shapes(model_path: ModelPath = None, log: Logs = None, shape: Shapes = None, tp: Tp = 1,
           drafter: Drafters = None, as_json: JsonFlag = False) -> None:
    """List the FP8 block-GEMM shapes worth tuning and where each came from."""
    try:
        found = find_shapes(FindShapesArgs(shapes=shape or [], log_files=log or [], model_path=model_path, tp=tp,
                                           drafters=_drafters(drafter)))
    except ToolError as err:
        fail(str(err))
    if as_json:
        print(found.model_dump_json(indent=2))
        return
    for line in found.derivation:
        echo(line)
    for s in found.shapes:
        echo(f"N={s.n} K={s.k} block=[{s.block_n}, {s.block_k}]  from {s.source}")
    if not found.shapes:
        echo(found.note)


RequiredShapes = Annotated[list[str], Opt("--shapes", metavar="N,K", help="A shape (repeat).")]
GpuCount = Annotated[int, Opt("--gpu-count", metavar="N", min=1, max=4096, help="Number of GPUs.")]
BatchSizes = Annotated[Optional[list[int]], Opt("--batch-size", metavar="M", min=1, max=1 << 20,
                                                         help="Batch size M (repeat) [SGLang's list].")]


def plan(shape: RequiredShapes, gpu_count: GpuCount = ASSUMED_TARGET_GPUS, batch_size: BatchSizes = None, as_json: JsonFlag = False) -> None:
    """Show how (shape x batch size) units would be split over GPUs, longest first."""
    try:
        args = PlanTuningArgs(shapes=shape, gpus=list(range(gpu_count)), **({"batch_sizes": batch_size} if batch_size else {}))
        result = plan_tuning(args)
    except ToolError as err:
        fail(str(err))
    if as_json:
        print(result.model_dump_json(indent=2))
        return
    echo(f"{result.total_units} units; estimated makespan / lower bound = {result.ratio:.3f}")
    for work in result.per_gpu:
        echo(f"GPU {work.gpu}: {len(work.units)} units, est. cost {work.est_cost:.1f}")


def _uninstall_on_host(folder, installed_by: str, force: bool, executor_given: str | None,
                       ssh_options: list[str] | None):
    """Undo through the executor that installed (with the ssh options the user gives now)."""
    where, options = reach_of_run(folder.path, executor_given, ssh_options)  # the host only by resume's rule
    if str(where) != installed_by:
        raise ToolError(f"the configs were installed on {installed_by} but the run's executor is now "
                        f"{str(where)!r}; its ledger no longer reaches that host")
    executor = make_executor(where, folder.jobs_dir, ssh_options=options, outage=outage_wait())
    return uninstall_on_host(executor, folder.path, force=force)
