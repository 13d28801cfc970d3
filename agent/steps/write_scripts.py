"""Step ``write_scripts``: serve_baseline.sh, serve_<variant>.sh, run_measure.sh into the run folder.

Variants: ``baseline`` always; ``mtp`` when the ``infer_mtp`` outcome carries a recommendation
(``tools.mtp.infer.Recommendation``: flags, env, rationale, where each flag comes from). The measure plan is also written as
``measure_plan.json`` so the benchmark step runs exactly what was reviewed.

Step params (all optional): input_len, output_len, prompts_per_concurrency, min_prompts,
warmup_requests, ready_timeout_s, port; extra_flags ({flag: {"value", "origin"}}, set only by the
LLM planner from flags the flag guard accepted).
"""
from __future__ import annotations

import os

from agent.steps.base import PlanStep, StepContext, StepOutcome
from agent.steps.infer_mtp import recommendation
from tools.mtp.infer import Recommendation
from tools.scripts import EnvChoice, FlagChoice, MeasurePlan, ServeVariant
from tools.scripts.models import RESERVED_FLAGS
from tools.scripts.render import render_measure_script, render_serve_script

PLAN_FILE = "measure_plan.json"
_PLAN_PARAMS = ("input_len", "output_len", "prompts_per_concurrency", "min_prompts", "warmup_requests",
                "ready_timeout_s", "port")


def _source(recommended: Recommendation, flag: str) -> str:
    origin = recommended.flag_origins.get(flag)
    if origin is not None and origin.path:
        return origin.cite()
    return "recommended by infer_mtp without a citation: check before use"


def _mtp_variant(base: ServeVariant, recommended: Recommendation) -> tuple[ServeVariant, list[str]]:
    notes: list[str] = []
    flags = []
    for flag, value in recommended.flags.items():
        if flag in RESERVED_FLAGS:
            notes.append(f"{flag} from the recommendation is left to the script's own setting")
            continue
        flags.append(FlagChoice(flag=flag, value=value, source=_source(recommended, flag)))
    env = [EnvChoice(name=k, value=v, source="infer_mtp recommendation") for k, v in recommended.env.items()]
    rationale = list(recommended.rationale)
    variant = base.model_copy(update={"name": "mtp", "flags": flags, "env": env, "rationale": rationale})
    return ServeVariant.model_validate(variant.model_dump()), notes  # re-validate names and values


def _with_extra_flags(variants: list[ServeVariant], extra_flags: dict) -> list[ServeVariant]:
    """Flags the LLM planner proposed and the flag guard accepted ({flag: {value, origin}}):
    added to every variant but the baseline (or, with no other variant, to a new ``extra`` one)."""
    if not extra_flags:
        return variants
    choices = [FlagChoice(flag=f, value=str(v.get("value", "")), source=str(v.get("origin") or "user-accepted"))
               for f, v in extra_flags.items()]
    targets = variants[1:] or [variants[0].model_copy(update={"name": "extra", "flags": [], "rationale": [
        "baseline plus the extra flags the LLM planner proposed and the flag guard accepted"]})]
    tuned = []
    for v in targets:
        known = {c.flag for c in v.flags}
        tuned.append(ServeVariant.model_validate({**v.model_dump(), "flags": [
            *[c.model_dump() for c in v.flags], *[c.model_dump() for c in choices if c.flag not in known]]}))
    return [variants[0], *tuned]


def build_plan(ctx: StepContext, step: PlanStep) -> tuple[MeasurePlan, list[str]]:
    s = ctx.settings
    gpus = s.gpus if s.gpus is not None else ([g.index for g in ctx.gpus] or None)
    tp = s.tp or (len(gpus) if gpus else 1)
    model = s.model_path or s.model
    base = ServeVariant(name="baseline", model_path=model, tp=tp, gpus=gpus,
                        rationale=["SGLang defaults for this model: the reference every ratio is against"])
    variants, notes = [base], []
    recommended = recommendation(ctx.outcomes)
    if recommended:
        mtp, notes = _mtp_variant(base, recommended)
        variants.append(mtp)
    variants = _with_extra_flags(variants, step.params.get("extra_flags") or {})
    extra = {k: step.params[k] for k in _PLAN_PARAMS if k in step.params}
    tokenizer = s.tokenizer or s.model_path
    plan = MeasurePlan(variants=variants, concurrency=s.concurrency, tokenizer=tokenizer, **extra)
    return plan, notes


def _multinode(ctx: StepContext, plan: MeasurePlan):
    """``--nodes N`` (N > 1): per-node serve scripts and a Slurm batch script per variant."""
    s = ctx.settings
    if s.nodes <= 1:
        return None
    from tools.scripts.multinode_variants import render_variants_multinode

    partition = s.executor.partition(":")[2] or None if s.executor.startswith("slurm") else None
    written = render_variants_multinode(ctx.run.path, plan.variants, s.nodes, s.sglang_python, plan.port, s.tp,
                                        len(ctx.gpus), s.dist_init_addr, partition)
    for relative in written.files:
        ctx.emit("artifact_written", path=relative, bytes=ctx.run.file(relative).stat().st_size)
    return written


def run(ctx: StepContext, step: PlanStep) -> StepOutcome:
    plan, notes = build_plan(ctx, step)
    python = ctx.settings.sglang_python
    texts = {f"serve_{v.name}.sh": render_serve_script(v, python, plan.port) for v in plan.variants}
    texts["run_measure.sh"] = render_measure_script(plan, python)
    for name, text in texts.items():
        os.chmod(ctx.write_artifact(name, text), 0o755)
    ctx.write_artifact(PLAN_FILE, plan.model_dump_json(indent=2))
    names = [v.name for v in plan.variants]
    summary = (f"wrote {', '.join(texts)} for {' vs '.join(names)} at concurrency "
               f"{' '.join(map(str, plan.concurrency))}; review them before running on a shared cluster")
    multinode = _multinode(ctx, plan)
    if multinode is not None:
        summary += (f"; multi-node scripts for {ctx.settings.nodes} nodes (tp {multinode.tp_size}, "
                    f"{multinode.gpus_per_node} GPUs per node) under multinode/")
        notes += multinode.notes
    if notes:
        summary += "; " + "; ".join(notes)
    return StepOutcome(kind="write_scripts", status="done", reason="scripts_written", summary=summary,
                       artifacts=[*texts, PLAN_FILE, *(multinode.files if multinode else [])],
                       data={"variants": {v.name: v.model_dump() for v in plan.variants},
                             "scripts": list(texts), "plan": PLAN_FILE,
                             "run_command": f"bash {ctx.run.path / 'run_measure.sh'}"})
