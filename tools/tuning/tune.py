"""The tuning decision tree: shapes -> skip existing -> engagement -> scripts -> one job per GPU ->
merge -> install -> manifest. Without GPUs it stops at the scripts ("planned").

Shapes come from ``shapes``, server logs, the model's config.json and, with GPUs as a last resort,
a discovery boot (job ``discovery``) whose default-config warnings are mined. A run planned without
a GPU is resumed on the GPU host, so a verdict resting on that host's GPU, environment or SGLang is
``planned`` here, never ``skipped`` (docs/tuning.md: When nothing is tuned).

Idempotent: scripts are rewritten identically, jobs re-attach by key, finished units are skipped,
and an install the manifest records as done is not repeated (it would back up our own files as
originals). The GPU half (fan-out, merge, install) is tools/tuning/tune_gpus.py.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from tools.base import ToolError, cap_lines
from tools.jobs import Executor
from tools.tuning.discovery import DiscoveryResult, discovery_variant, run_discovery
from tools.tuning.engagement import FINAL_BASES
from tools.tuning.install import MANIFEST, load_manifest
from tools.tuning.outcome import TUNING_DIR, Recorder, TuneKernelsArgs, TuningOutcome, outcome
from tools.tuning.plan import make_units, plan_units
from tools.tuning.prepare import PrepareTuningArgs, TuningPreparation, TuningReason, prepare_tuning
from tools.tuning.render import render_tuning, shellcheck
from tools.tuning.rounds import choose_round
from tools.tuning.script import find_script, introspect_script
from tools.tuning.tune_gpus import finish_interrupted_install, run_on_gpus
from tools.child_env import child_env

DISCOVERY_STATE = f"{TUNING_DIR}/discovery.json"
GPU_HOST_WILL = {  # what resuming on the GPU host does for each verdict that waits for it
    "no_shapes": "boot the baseline server once (discovery job), mine its 'Using default W8A8 Block FP8 kernel "
                 "config' warnings and tune those shapes on every GPU",
    "all_configured": "look the shapes up again for its GPU in the config folder of the SGLang the server runs, "
                      "and tune the ones still missing",
    "not_engaged": "decide from its GPU and environment whether the Triton block-FP8 path is used, and tune if it is",
}


def _waits(args: TuneKernelsArgs) -> str:
    """Why GPU work waits (for a summary): no GPU here, or --plan-only."""
    return "no GPU here" if not args.gpus else ("--plan-only: written for review, no GPU job started; `dsv4-agent "
                                                "resume RUN` starts them")


def _earlier_server_logs(executor: Executor) -> list[str]:
    """Logs of server jobs already run in this run (their warnings name the shapes to tune)."""
    return [s.log_path for s in executor.jobs() if s.kind in ("serve", "discovery") and Path(s.log_path).exists()]


def _prepare(args: TuneKernelsArgs, executor: Executor) -> TuningPreparation:
    log_files = list(dict.fromkeys([*args.log_files, *_earlier_server_logs(executor)]))
    device = args.gpus[0].name if args.gpus else args.device_name
    return prepare_tuning(PrepareTuningArgs(
        shapes=args.shapes, log_files=log_files, model_path=args.model_path,
        checkpoint_config=args.checkpoint_config, tp=args.gpu_plan.tp,
        sglang_root=args.sglang_root, device_name=device, retune=args.retune, force_tune=args.force_tune,
        server_args=args.server_args, env=child_env(args.env)))  # what the server will see


def _nothing_discovered(found: DiscoveryResult) -> str:
    text = Path(found.log_path).read_text(errors="replace") if Path(found.log_path).exists() else ""
    loaded = sum("Using configuration from" in line and "W8A8 Block FP8" in line for line in text.splitlines())
    if loaded:
        return (f"the discovery server (log {found.log_path}) found a config for each of the {loaded} block-FP8 "
                "shapes it looked up and used no default: nothing to tune (--retune with --shapes to tune anyway)")
    return (f"the discovery server (log {found.log_path}) looked up no W8A8 Block FP8 config: the Triton block-FP8 "
            "path did not run on this setup, so tuning it would change nothing")


def _discover(args: TuneKernelsArgs, executor: Executor, run_dir: Path, rec: Recorder, prep: TuningPreparation,
              gpu_list: list[int]) -> tuple[TuningPreparation, dict, TuningReason | None]:
    """With GPUs and no shapes (or a discovery server a crash left running): boot the baseline
    server once and mine its log. (preparation, discovery facts, why nothing is tuned if decided here)."""
    in_flight = any(state.kind == "discovery" and not state.done for state in executor.jobs())
    if not args.gpus or not args.start_jobs or not (in_flight or prep.skip_kind == "no_shapes"):
        return prep, {}, None
    # A discovery server left running by a crash is finished first (its log may be mid-load).
    if not in_flight and prep.engagement.verdict == "not_engaged" and not args.force_tune:
        prep.reason = ("no shapes known and the Triton block-FP8 path is not used here, so a discovery boot "
                       "would find nothing to tune (--force-tune boots it anyway): " + "; ".join(prep.engagement.evidence))
        return prep, {}, "not_engaged_no_discovery"
    variant = discovery_variant(args.model_path or args.model, args.gpu_plan.tp, gpu_list,
                                list(args.server_args), dict(args.env))
    rec.emit("progress", message=f"tuning: no shapes known; discovery boot of the baseline server on GPUs {gpu_list}")
    found = run_discovery(executor, variant, args.sglang_python, run_dir / DISCOVERY_STATE,
                          ready_timeout_s=args.discovery_timeout_s, emit=lambda kind, data: rec.emit(kind, **data))
    prep = _prepare(args, executor)  # the discovery job's log is now among the server logs
    if prep.skip_kind != "no_shapes":
        return prep, {"discovery": found.model_dump()}, None
    prep.reason = _nothing_discovered(found)
    return prep, {"discovery": found.model_dump()}, "discovery_found_nothing"


def _not_tuned(args: TuneKernelsArgs, run_dir: Path, prep: TuningPreparation, artifacts: list[str],
               reason: TuningReason, **data: Any) -> TuningOutcome:
    """``skipped`` when the GPU host would decide the same, else (no GPU here) ``planned``."""
    final = prep.skip_kind == "no_block_fp8" or (
        prep.skip_kind == "not_engaged" and prep.engagement.basis in FINAL_BASES)
    if (args.gpus and (args.start_jobs or prep.skip_kind != "no_shapes")) or final:
        return outcome("skipped", reason, prep.reason, prep, artifacts, **data)
    there = GPU_HOST_WILL[prep.skip_kind]
    return outcome("planned", reason, f"{_waits(args)}, so this waits for the GPU host: {prep.reason}. There, "
                                      f"`dsv4-agent resume {run_dir}` will {there}", prep, artifacts,
                   gpu_host_will=there, **data)


def tune_kernels(args: TuneKernelsArgs, executor: Executor, run_dir: Path, rec: Recorder) -> TuningOutcome:
    """Decide, plan, and (with GPUs) tune, merge and install; the outcome says what happened and why.
    Files are reached by absolute path (jobs run in other folders); messages name ``run_dir`` as given."""
    shown, run_dir = run_dir, run_dir.resolve()
    gpu_list = args.gpu_plan.tuning_gpus  # preflight's plan, the one the serve scripts name
    rec.emit("progress", message=f"tuning: {args.gpu_plan.described()}")
    try:
        finished = finish_interrupted_install(args, executor, run_dir, rec)
    except ToolError as err:
        return outcome("failed", "install_failed", f"tuned but not installed: {err}", None, [])
    try:
        prep = _prepare(args, executor)
    except ToolError as err:
        return outcome("failed", "tuning_input_error", str(err), None, [])
    try:
        prep, discovery, reason = _discover(args, executor, run_dir, rec, prep, gpu_list)
    except ToolError as err:
        return outcome("failed", "discovery_failed", str(err), prep, [])
    artifacts = [f"{TUNING_DIR}/shapes.json"]
    rec.write_artifact(f"{TUNING_DIR}/shapes.json", prep.model_dump_json(indent=2) + "\n")
    rec.emit("progress", message=f"tuning: {len(prep.shapes)} shapes ({prep.shapes_note}), "
                                 f"{len(prep.skipped_existing)} already tuned, Triton path {prep.engagement.verdict}")
    manifest_path = run_dir / MANIFEST
    if manifest_path.exists() and load_manifest(manifest_path).state == "installed":
        manifest = load_manifest(manifest_path)  # a re-run after this run's install: nothing left to do
        done = finished or f"already installed {len(manifest.entries)} configs in this run"
        return outcome("done", "already_installed", f"{done} into {manifest.config_dir} (undo: dsv4-agent tuning "
                       f"uninstall {shown.name})", prep, artifacts + [MANIFEST],
                       installed=[e.target for e in manifest.entries], manifest=MANIFEST)
    if prep.decision == "skip":
        return _not_tuned(args, shown, prep, artifacts, reason or prep.skip_kind, **discovery)
    return _write_scripts(args, executor, run_dir, rec, prep, gpu_list, artifacts, discovery, shown=shown)


def _write_scripts(args: TuneKernelsArgs, executor: Executor, run_dir: Path, rec: Recorder, prep: TuningPreparation,
                   gpu_list: list[int], artifacts: list[str], discovery: dict, shown: Path) -> TuningOutcome:
    """Plan the units over the GPUs and write the per-GPU scripts; with GPUs, run them (``shown``:
    the run folder as the user named it, for the commands in the summary)."""
    units = make_units(prep.to_tune, args.batch_sizes)
    plan, number = plan_units(units, gpu_list), 1
    if args.gpus and args.start_jobs:  # a resume on other GPUs hands the units left on (tools/tuning/rounds.py)
        (run_dir / TUNING_DIR).mkdir(parents=True, exist_ok=True)
        try:
            chosen = choose_round(executor, run_dir / TUNING_DIR, units, gpu_list, executor.stop)
        except ToolError as err:
            return outcome("failed", "tuning_jobs_failed", str(err), prep, artifacts, **discovery)
        plan, number = chosen.plan, chosen.number
        if chosen.note:
            rec.emit("progress", message=f"tuning: {chosen.note}")
    plan_lines = [f"{plan.total_units} units over GPUs {[w.gpu for w in plan.per_gpu]}"
                  + (f" (round {number}: {len(units) - plan.total_units} tuned before)" if number > 1 else "")
                  + f"; estimated makespan/lower bound {plan.ratio:.2f}"]
    plan_lines += [f"GPU {w.gpu}: {len(w.units)} units, cost {w.est_cost:.1f}: " + " ".join(u.id for u in w.units)
                   for w in plan.per_gpu]
    rec.write_artifact(f"{TUNING_DIR}/plan.txt", "\n".join(
        prep.derivation + ["", args.gpu_plan.described()] + plan_lines) + "\n")
    artifacts.append(f"{TUNING_DIR}/plan.txt")
    try:
        info = introspect_script(find_script(Path(args.sglang_root) if args.sglang_root else None))
    except ToolError as err:
        why = f"cannot write the tuning scripts: {err}. The shapes and the GPU plan are in {TUNING_DIR}/plan.txt"
        if args.gpus:
            return outcome("skipped", "no_tuning_script", why, prep, artifacts, plan=plan_lines, **discovery)
        return outcome("planned", "no_tuning_script", f"no GPU here; {why}. Tuning on the GPU host needs an SGLang "
                                                      "git checkout there (--sglang-src PATH)", prep, artifacts,
                       plan=plan_lines)
    rendered = render_tuning(run_dir / TUNING_DIR, plan.per_gpu, info, python=args.sglang_python,
                             device_name=prep.device_name or "UNKNOWN_GPU")
    for relative in rendered.files:
        rec.emit("artifact_written", path=relative, bytes=(run_dir / relative).stat().st_size)
    artifacts += rendered.files
    findings = shellcheck([run_dir / p for p in rendered.scripts.values()])
    if findings:
        rec.emit("error", error="shellcheck_findings", message="shellcheck findings in generated tuning scripts",
                 findings=findings[:4000])
    data = {"plan": plan_lines, "gpu_plan": args.gpu_plan.model_dump(), **discovery, "mode": rendered.mode,
            "scripts": rendered.scripts, "script_notes": info.notes}
    if not args.gpus or not args.start_jobs:
        runs = " ; ".join(f"bash {shown}/{p}" for p in rendered.scripts.values())
        return outcome("planned", "no_gpu" if not args.gpus else "plan_only",
                       f"{_waits(args)}: {len(units)} tuning units for {len(gpu_list)} GPUs written to {TUNING_DIR}/ "
                       f"({rendered.mode} mode; {args.gpu_plan.described()}). On the GPU host run, one per GPU "
                       f"in parallel: {cap_lines([runs], 1, 600).text}", prep, artifacts, **data)
    return run_on_gpus(args, executor, run_dir, rec, prep, plan, rendered, units, artifacts, data, number)
