"""The GPU half of the tuning decision tree (``tools/tuning/tune.py``): one job per GPU, merge the
per-process outputs, install where the server runs, and say so in the outcome."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from tools.base import ToolError
from tools.jobs import Executor
from tools.tuning.in_place import is_our_corpus, server_config_dir
from tools.tuning.fanout import FanoutJob, run_fanout
from tools.tuning.install import MANIFEST, Manifest, install_configs, load_manifest
from tools.tuning.merge import merge_outputs
from tools.tuning.outcome import TUNING_DIR, Recorder, TuneKernelsArgs, TuningOutcome, outcome
from tools.tuning.plan import TuningPlan, Unit
from tools.tuning.prepare import TuningPreparation
from tools.tuning.remote_install import HOST_SCRIPT, install_on_host
from tools.tuning.render import RenderedTuning
from tools.tuning.rounds import round_key


def _install_target(args: TuneKernelsArgs) -> Path:
    """The config folder of the SGLang the *server* runs (tools/tuning/in_place.py's rule)."""
    if args.config_dir:
        return Path(args.config_dir)
    return server_config_dir(args.sglang_python, str(args.sglang_root) if args.sglang_root else None)


def _install_target_meanwhile(args: TuneKernelsArgs, executor: Executor,
                              after: threading.Event) -> Callable[[], Path]:
    """The local install target, looked up on a thread once ``after`` is set (the first tuning job is
    launched): its probe starts the server's interpreter, which would otherwise stand between the last
    tuning job and the first server. Calling the result gives the folder or raises the lookup's ToolError."""
    if executor.capabilities.remote_host:
        return lambda: _install_target(args)  # unused: the host installs for itself

    def lookup() -> Path:
        after.wait()
        return _install_target(args)

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="install-target")
    found = pool.submit(lookup)
    pool.shutdown(wait=False)
    return found.result


def _install(args: TuneKernelsArgs, executor: Executor, run_dir: Path, rec: Recorder, merged: list[Path],
             target: Callable[[], Path] | None = None) -> Manifest:
    """Install where the server runs: on the SSH host through a job there, else from this machine
    (local, and Slurm whose run folder is shared: see the summary's note) into ``target()``."""
    if not executor.capabilities.remote_host:
        return install_configs(merged, (target or (lambda: _install_target(args)))(), run_dir)
    root = args.sglang_root
    source = args.sglang_src or (root if not is_our_corpus(root) else None)
    rec.emit("progress", message=f"tuning: installing {len(merged)} configs on the GPU host ({HOST_SCRIPT} as a job there)")
    return install_on_host(executor, merged, run_dir, sglang_python=args.sglang_python,
                           sglang_src=source, config_dir=args.config_dir)


def finish_interrupted_install(args: TuneKernelsArgs, executor: Executor, run_dir: Path, rec: Recorder) -> str | None:
    """An install a crash cut short (its manifest still says 'installing') is finished before anything is
    decided again: the files it already put in SGLang's folder are this run's, not configs SGLang ships,
    and taking them for originals would back them up as such. Returns a note, or None (nothing to do)."""
    path = run_dir / MANIFEST
    if not path.exists() or (manifest := load_manifest(path)).state != "installing":
        return None
    merged = [run_dir / TUNING_DIR / "merged" / e.name for e in manifest.entries]
    if not all(p.exists() for p in merged):
        raise ToolError(f"the install this run began ({path}) was cut short and its merged files are gone; "
                        f"`dsv4-agent tuning uninstall {run_dir}` undoes what it wrote")
    rec.emit("progress", message=f"tuning: finishing the install a crash interrupted ({len(merged)} configs)")
    with_dir = args.model_copy(update={"config_dir": args.config_dir or manifest.config_dir})
    _install(with_dir, executor, run_dir, rec, merged)
    return f"finished the install a crash had interrupted ({len(merged)} configs)"


def _fanout_jobs(run_dir: Path, plan: TuningPlan, rendered: RenderedTuning, round_number: int) -> list[FanoutJob]:
    jobs = []
    for work in plan.per_gpu:
        by_shape: dict[str, list[int]] = {}
        for unit in work.units:
            by_shape.setdefault(f"{unit.n},{unit.k}", []).append(unit.m)
        jobs.append(FanoutJob(gpu=work.gpu, key=round_key(round_number, work.gpu), argv=["bash", str(run_dir / rendered.scripts[work.gpu])],
                              cwd=str(run_dir / TUNING_DIR), unit_ids=[u.id for u in work.units], units_by_shape=by_shape))
    return jobs


def run_on_gpus(args: TuneKernelsArgs, executor: Executor, run_dir: Path, rec: Recorder, prep: TuningPreparation,
                plan: TuningPlan, rendered: RenderedTuning, units: list[Unit], artifacts: list[str],
                data: dict[str, Any], round_number: int = 1) -> TuningOutcome:
    tuning_dir = run_dir / TUNING_DIR
    jobs = _fanout_jobs(run_dir, plan, rendered, round_number)
    launched = threading.Event()

    def on_event(kind: str, payload: dict) -> None:
        rec.emit(kind, **payload)
        if kind == "job_launched":
            launched.set()

    target = _install_target_meanwhile(args, executor, after=launched)
    try:
        result = run_fanout(executor, jobs, on_event, poll_s=args.poll_s, timeout_s=args.timeout_s)
    finally:
        launched.set()  # the lookup never waits past the jobs
    data["jobs"] = [j.model_dump() for j in result.jobs]
    failed = [j for j in result.jobs if j.status != "succeeded"]
    if failed:
        tails = {j.keys[-1]: executor.read_log(j.keys[-1], 1500) for j in failed}
        return outcome("failed", "tuning_jobs_failed", "tuning jobs failed: " + "; ".join(
            f"GPU {j.gpu} {j.status} after {len(j.keys)} attempt(s) ({j.reason})" for j in failed)
            + ". Nothing was installed; logs under jobs/ (one folder per attempt). Finished units are kept.",
            prep, artifacts, log_tails=tails, **data)
    try:
        merged = merge_outputs(tuning_dir / "out", tuning_dir / "merged", [u.id for u in units])
        if merged.missing_units:
            raise ToolError(f"{len(merged.missing_units)} planned units have no result (e.g. {merged.missing_units[:3]}); "
                            "re-run the campaign to resume them")
        manifest = _install(args, executor, run_dir, rec, [Path(f.path) for f in merged.files], target)
    except ToolError as err:
        return outcome("failed", "install_failed", f"tuned but not installed: {err}", prep, artifacts, **data)
    rec.emit("artifact_written", path=MANIFEST, bytes=(run_dir / MANIFEST).stat().st_size)
    where, written = "", [MANIFEST]
    if manifest.installed_by != "local":
        where, written = f" on the GPU host ({manifest.installed_by})", [MANIFEST, HOST_SCRIPT]
    if executor.capabilities.jobs_on_other_nodes:
        where = (f" from this machine (the Slurm nodes read them only if {manifest.config_dir} is on the "
                 "filesystem they share with it, as the run folder is)")
    return outcome("done", "tuned", f"tuned {len(units)} units on {len(jobs)} GPUs in {result.elapsed_s:.0f} s; installed "
                                    f"{len(manifest.entries)} configs into {manifest.config_dir}{where} (undo: dsv4-agent "
                                    f"tuning uninstall {run_dir.name})", prep, artifacts + written,
                   installed=[e.target for e in manifest.entries], manifest=MANIFEST,
                   installed_by=manifest.installed_by, **data)
