"""Step adapter: FP8 block-GEMM kernel tuning (shapes -> skip existing -> engagement -> scripts ->
one job per GPU -> merge -> install -> manifest). Without GPUs it stops at the scripts ("planned").

Shapes come from ``--shapes``, server logs (given, or of earlier server jobs of this run), the
model's config.json, and — with GPUs, as the last resort — a discovery boot: the baseline server
is started once in the background (job ``discovery``), stopped when ready, and its
``Using default W8A8 Block FP8 kernel config ... Config file not found at <path>`` warnings mined.

Status when nothing is tuned. A resumed run reuses ``done``/``skipped`` outcomes, and a run planned
on a laptop is resumed on the GPU host, so ``skipped`` is kept for verdicts the GPU host would reach
too; anything resting on facts only the GPU host has is ``planned`` when there is no GPU here:

- no shapes known (no --shapes, no log, no usable config.json): GPU here -> discovery boot; no GPU
  -> ``planned`` (the GPU host boots the discovery server).
- config.json has no block-FP8 weights: ``skipped`` everywhere (no source would find shapes).
- every shape already has a config: GPU here -> ``skipped``; no GPU -> ``planned`` (the lookup
  depends on the GPU's name and the SGLang the server runs, which may not be the source read here).
- Triton path not engaged: decided by a server log, an explicit ``--fp8-gemm-backend`` or a non-128
  weight block -> ``skipped`` everywhere; decided by GPU architecture and environment -> ``skipped``
  with a GPU, ``planned`` without (the GPU host's GPU and environment decide).
- with a GPU and the Triton path predicted not engaged, no discovery boot (it would find nothing)
  unless ``--force-tune``; a discovery log with no default-config warning -> ``skipped``.
- the source has no tuning script (wheel): GPU here -> ``skipped`` (the summary says how to get a
  checkout); no GPU -> ``planned`` (the GPU host may have a checkout, given with ``--sglang-src``).

Idempotent: scripts are rewritten identically, jobs re-attach by key through the executor's ledger
(the discovery server too; once it was seen ready, its log is reused), finished units are skipped
by the per-GPU driver, and an install already recorded as done in the manifest is not repeated
(re-installing would back up our own files as if they were originals).

Params (``step.params``, all optional): ``log_files`` (server logs to mine), ``server_args`` and
``env`` (how the benchmark server will start: the engagement check and the discovery boot use
them), ``device_name`` (the target GPU when planning without one), ``batch_sizes``, ``config_dir``
(install target override), ``poll_s``, ``timeout_s``, ``discovery_timeout_s`` (readiness, 1800).
"""
from __future__ import annotations

import os
from pathlib import Path

from agent.steps.base import PlanStep, StepContext, StepOutcome
from tools.base import ToolError, cap_lines
from tools.source.resolve import cache_dir
from tools.tuning.configs import find_config_dir, installed_package_parent
from tools.tuning.discovery import DiscoveryResult, discovery_variant, run_discovery
from tools.tuning.engagement import FINAL_BASES
from tools.tuning.fanout import FanoutJob, run_fanout
from tools.tuning.install import MANIFEST, install_configs, load_manifest
from tools.tuning.merge import merge_outputs
from tools.tuning.plan import DEFAULT_BATCH_SIZES, make_units, plan_units
from tools.tuning.remote_install import HOST_SCRIPT, install_on_host
from tools.tuning.prepare import PrepareTuningArgs, TuningPreparation, TuningReason, prepare_tuning
from tools.tuning.render import render_tuning, shellcheck
from tools.tuning.script import find_script, introspect_script

TUNING_DIR = "tuning"
DISCOVERY_STATE = f"{TUNING_DIR}/discovery.json"
GPU_HOST_WILL = {  # what resuming on the GPU host does for each verdict that waits for it
    "no_shapes": "boot the baseline server once (discovery job), mine its 'Using default W8A8 Block FP8 kernel "
                 "config' warnings and tune those shapes on every GPU",
    "all_configured": "look the shapes up again for its GPU in the config folder of the SGLang the server runs, "
                      "and tune the ones still missing",
    "not_engaged": "decide from its GPU and environment whether the Triton block-FP8 path is used, and tune if it is",
}
PLAN_GPUS_WITHOUT_HARDWARE = 8  # a DeepSeek-V4 host; overridden by --gpus or --tp


def _earlier_server_logs(ctx: StepContext) -> list[str]:
    """Logs of server jobs already run in this run (their warnings name the shapes to tune)."""
    logs = []
    for state in ctx.executor.jobs():
        if state.kind in ("serve", "discovery") and Path(state.log_path).exists():
            logs.append(state.log_path)
    return logs


def _nothing_discovered(found: DiscoveryResult) -> str:
    text = Path(found.log_path).read_text(errors="replace") if Path(found.log_path).exists() else ""
    loaded = sum("Using configuration from" in line and "W8A8 Block FP8" in line for line in text.splitlines())
    if loaded:
        return (f"the discovery server (log {found.log_path}) found a config for each of the {loaded} block-FP8 "
                "shapes it looked up and used no default: nothing to tune (--retune with --shapes to tune anyway)")
    return (f"the discovery server (log {found.log_path}) looked up no W8A8 Block FP8 config: the Triton block-FP8 "
            "path did not run on this setup, so tuning it would change nothing")


def _outcome(status: str, reason: TuningReason, summary: str, prep: TuningPreparation | None, artifacts: list[str],
             **data) -> StepOutcome:
    facts = {"shapes": [], "derivation": [], "skipped_existing": {}, "installed": [], "manifest": None,
             "engaged": None}
    if prep is not None:
        facts.update(shapes=[s.model_dump() for s in prep.shapes], derivation=prep.derivation,
                     skipped_existing=prep.skipped_existing,
                     engaged={"verdict": prep.engagement.verdict, "evidence": prep.engagement.evidence})
    facts.update(data)
    return StepOutcome(kind="tune_kernels", status=status, reason=reason, summary=summary, artifacts=artifacts,
                       data=facts)


def _plan_gpus(ctx: StepContext) -> list[int]:
    s = ctx.settings
    if ctx.gpus:
        have = [g.index for g in ctx.gpus]
        return [g for g in (s.gpus or have) if g in have]
    if s.gpus:
        return list(s.gpus)
    return list(range(s.tp or PLAN_GPUS_WITHOUT_HARDWARE))


def _install_target(ctx: StepContext, step: PlanStep) -> Path:
    """The config folder of the SGLang the *server* runs (never our cached wheel corpus)."""
    if step.params.get("config_dir"):
        return Path(step.params["config_dir"])
    parent = installed_package_parent(ctx.settings.sglang_python)
    if parent is not None:
        return find_config_dir(parent)
    root = ctx.sglang_root
    if root is not None and not Path(root).resolve().is_relative_to(cache_dir().resolve()):
        return find_config_dir(root)
    raise ToolError(f"{ctx.settings.sglang_python} has no sglang, so the folder the server reads configs from is "
                    "unknown; pass --sglang-python to the interpreter that runs the server")


def _prepare(ctx: StepContext, step: PlanStep, gpu_list: list[int]) -> TuningPreparation:
    s = ctx.settings
    log_files = list(dict.fromkeys(list(step.params.get("log_files", [])) + _earlier_server_logs(ctx)))
    device = ctx.gpus[0].name if ctx.gpus else step.params.get("device_name", "")
    env = {**os.environ, **step.params.get("env", {})}
    return prepare_tuning(PrepareTuningArgs(
        shapes=s.shapes, log_files=log_files, model_path=s.model_path, tp=s.tp or len(gpu_list) or 1,
        sglang_root=str(ctx.sglang_root) if ctx.sglang_root else None, device_name=device,
        retune=s.retune, force_tune=s.force_tune, server_args=step.params.get("server_args", []), env=env))


def _discover(ctx: StepContext, step: PlanStep, gpu_list: list[int]) -> DiscoveryResult:
    """Boot the baseline server once and keep its log (the job ledger makes this re-runnable)."""
    s = ctx.settings
    variant = discovery_variant(s.model_path or s.model, s.tp or len(gpu_list), gpu_list,
                                list(step.params.get("server_args", [])), dict(step.params.get("env", {})))
    ctx.progress(f"tuning: no shapes known; discovery boot of the baseline server on GPUs {gpu_list}")
    found = run_discovery(ctx.executor, variant, s.sglang_python, ctx.run.file(DISCOVERY_STATE),
                          ready_timeout_s=float(step.params.get("discovery_timeout_s", 1800.0)))
    ctx.emit("job_finished", key=found.key, kind="discovery", status="stopped", reused=found.reused,
             log=found.log_path)
    return found


def _not_tuned(ctx: StepContext, prep: TuningPreparation, artifacts: list[str], reason: TuningReason,
               **data) -> StepOutcome:
    """``skipped`` when the GPU host would decide the same, else (no GPU here) ``planned``."""
    final = prep.skip_kind == "no_block_fp8" or (
        prep.skip_kind == "not_engaged" and prep.engagement.basis in FINAL_BASES)
    if ctx.gpus or final:
        return _outcome("skipped", reason, prep.reason, prep, artifacts, **data)
    there = GPU_HOST_WILL[prep.skip_kind]
    return _outcome("planned", reason, f"no GPU here, so this waits for the GPU host: {prep.reason}. There, "
                               f"`dsv4-agent resume {ctx.run.path}` will {there}", prep, artifacts,
                    gpu_host_will=there, **data)


def run(ctx: StepContext, step: PlanStep) -> StepOutcome:
    s = ctx.settings
    gpu_list = _plan_gpus(ctx)
    try:
        prep = _prepare(ctx, step, gpu_list)
    except ToolError as err:
        return _outcome("failed", "tuning_input_error", str(err), None, [])
    discovery: dict = {}
    reason: TuningReason | None = None  # set when a discovery decision explains why nothing is tuned
    in_flight = any(state.kind == "discovery" and not state.done for state in ctx.executor.jobs())
    if ctx.gpus and (in_flight or prep.skip_kind == "no_shapes"):
        # A discovery server left running by a crash is finished first (its log may be mid-load).
        if not in_flight and prep.engagement.verdict == "not_engaged" and not s.force_tune:
            prep.reason = ("no shapes known and the Triton block-FP8 path is not used here, so a discovery boot "
                           "would find nothing to tune (--force-tune boots it anyway): "
                           + "; ".join(prep.engagement.evidence))
            reason = "not_engaged_no_discovery"
        else:
            try:
                found = _discover(ctx, step, gpu_list)
                prep = _prepare(ctx, step, gpu_list)  # the discovery job's log is now among the server logs
            except ToolError as err:
                return _outcome("failed", "discovery_failed", str(err), prep, [])
            discovery = {"discovery": found.model_dump()}
            if prep.skip_kind == "no_shapes":
                prep.reason, reason = _nothing_discovered(found), "discovery_found_nothing"
    artifacts = [f"{TUNING_DIR}/shapes.json"]
    ctx.write_artifact(f"{TUNING_DIR}/shapes.json", prep.model_dump_json(indent=2) + "\n")
    ctx.progress(f"tuning: {len(prep.shapes)} shapes ({prep.shapes_note}), {len(prep.skipped_existing)} already "
                 f"tuned, Triton path {prep.engagement.verdict}")
    manifest_path = ctx.run.file(MANIFEST)
    if manifest_path.exists() and load_manifest(manifest_path).state == "installed":
        manifest = load_manifest(manifest_path)  # a re-run after this run's install: nothing left to do
        return _outcome("done", "already_installed", f"already installed {len(manifest.entries)} configs in this run", prep,
                        artifacts + [MANIFEST], installed=[e.target for e in manifest.entries], manifest=MANIFEST)
    if prep.decision == "skip":
        return _not_tuned(ctx, prep, artifacts, reason or prep.skip_kind, **discovery)

    units = make_units(prep.to_tune, step.params.get("batch_sizes", DEFAULT_BATCH_SIZES))
    plan = plan_units(units, gpu_list)
    plan_lines = [f"{len(units)} units over GPUs {gpu_list}; estimated makespan/lower bound {plan.ratio:.2f}"]
    plan_lines += [f"GPU {w.gpu}: {len(w.units)} units, cost {w.est_cost:.1f}: " + " ".join(u.id for u in w.units)
                   for w in plan.per_gpu]
    ctx.write_artifact(f"{TUNING_DIR}/plan.txt", "\n".join(prep.derivation + [""] + plan_lines) + "\n")
    artifacts.append(f"{TUNING_DIR}/plan.txt")
    try:
        info = introspect_script(find_script(ctx.sglang_root))
    except ToolError as err:
        why = f"cannot write the tuning scripts: {err}. The shapes and the GPU plan are in {TUNING_DIR}/plan.txt"
        if ctx.gpus:
            return _outcome("skipped", "no_tuning_script", why, prep, artifacts, plan=plan_lines, **discovery)
        return _outcome("planned", "no_tuning_script", f"no GPU here; {why}. Tuning on the GPU host needs an SGLang git checkout "
                                   "there (--sglang-src PATH)", prep, artifacts, plan=plan_lines)
    data = {"plan": plan_lines, **discovery}
    tuning_dir = ctx.run.file(TUNING_DIR)
    rendered = render_tuning(tuning_dir, plan.per_gpu, info, python=s.sglang_python,
                             device_name=prep.device_name or "UNKNOWN_GPU")
    for relative in rendered.files:
        ctx.emit("artifact_written", path=relative, bytes=ctx.run.file(relative).stat().st_size)
    artifacts += rendered.files
    findings = shellcheck([ctx.run.file(p) for p in rendered.scripts.values()])
    if findings:
        ctx.emit("error", message="shellcheck findings in generated tuning scripts", findings=findings[:4000])
    data.update(mode=rendered.mode, scripts=rendered.scripts, script_notes=info.notes)
    if not ctx.gpus:
        runs = " ; ".join(f"bash {ctx.run.path}/{p}" for p in rendered.scripts.values())
        return _outcome("planned", "no_gpu", f"no GPU here: {len(units)} tuning units for {len(gpu_list)} GPUs written to "
                                   f"{TUNING_DIR}/ ({rendered.mode} mode). On the GPU host run, one per GPU in "
                                   f"parallel: {cap_lines([runs], 1, 600).text}", prep, artifacts, **data)
    return _run_on_gpus(ctx, step, prep, plan, rendered, units, artifacts, data)


def _run_on_gpus(ctx, step, prep, plan, rendered, units, artifacts, data) -> StepOutcome:
    manifest_path = ctx.run.file(MANIFEST)
    tuning_dir = ctx.run.file(TUNING_DIR)
    jobs = []
    for work in plan.per_gpu:
        by_shape: dict[str, list[int]] = {}
        for unit in work.units:
            by_shape.setdefault(f"{unit.n},{unit.k}", []).append(unit.m)
        jobs.append(FanoutJob(gpu=work.gpu, key=f"tune-gpu{work.gpu}", argv=["bash", str(ctx.run.file(rendered.scripts[work.gpu]))],
                              cwd=str(tuning_dir), unit_ids=[u.id for u in work.units], units_by_shape=by_shape))

    def emit(event_type: str, payload: dict) -> None:
        ctx.trace.emit(event_type, "gpu", **payload)

    result = run_fanout(ctx.executor, jobs, emit, poll_s=float(step.params.get("poll_s", 1.0)),
                        timeout_s=step.params.get("timeout_s"))
    data["jobs"] = [j.model_dump() for j in result.jobs]
    failed = [j for j in result.jobs if j.status != "succeeded"]
    if failed:
        tails = {j.keys[-1]: ctx.executor.read_log(j.keys[-1], 1500) for j in failed}
        return _outcome("failed", "tuning_jobs_failed", "tuning jobs failed after one retry: " + "; ".join(
            f"GPU {j.gpu} {j.status} ({j.reason})" for j in failed) + ". Nothing was installed; logs under jobs/. "
            "Re-running the campaign resumes and keeps finished units.", prep, artifacts, log_tails=tails, **data)
    try:
        merged = merge_outputs(tuning_dir / "out", tuning_dir / "merged", [u.id for u in units])
        if merged.missing_units:
            raise ToolError(f"{len(merged.missing_units)} planned units have no result (e.g. {merged.missing_units[:3]}); "
                            "re-run the campaign to resume them")
        manifest = _install(ctx, step, [Path(f.path) for f in merged.files])
    except ToolError as err:
        return _outcome("failed", "install_failed", f"tuned but not installed: {err}", prep, artifacts, **data)
    ctx.emit("artifact_written", path=MANIFEST, bytes=manifest_path.stat().st_size)
    where, written = "", [MANIFEST]
    if manifest.installed_by != "local":
        where, written = f" on the GPU host ({manifest.installed_by})", [MANIFEST, HOST_SCRIPT]
    if ctx.executor.name == "slurm":
        where = (f" from this machine (the Slurm nodes read them only if {manifest.config_dir} is on the "
                 "filesystem they share with it, as the run folder is)")
    return _outcome("done", "tuned", f"tuned {len(units)} units on {len(jobs)} GPUs in {result.elapsed_s:.0f} s; installed "
                            f"{len(manifest.entries)} configs into {manifest.config_dir}{where} (undo: dsv4-agent "
                            f"tuning uninstall {ctx.run.path.name})", prep, artifacts + written,
                    installed=[e.target for e in manifest.entries], manifest=MANIFEST,
                    installed_by=manifest.installed_by, **data)


def _install(ctx: StepContext, step: PlanStep, merged: list[Path]):
    """Install where the server runs: on the SSH host through a job there, else from this machine
    (local, and Slurm whose run folder is shared: see the summary's note)."""
    if not hasattr(ctx.executor, "fetch_run_file"):
        return install_configs(merged, _install_target(ctx, step), ctx.run.path)
    root = ctx.sglang_root
    source = ctx.settings.sglang_src or (str(root) if root is not None and not Path(root).resolve().is_relative_to(
        cache_dir().resolve()) else None)  # our cached wheel corpus is never what the host's server runs
    ctx.progress(f"tuning: installing {len(merged)} configs on the GPU host ({HOST_SCRIPT} as a job there)")
    return install_on_host(ctx.executor, merged, ctx.run.path, sglang_python=ctx.settings.sglang_python,
                           sglang_src=source, config_dir=step.params.get("config_dir"))
