"""Step ``write_scripts``: serve_baseline.sh, serve_<variant>.sh, run_measure.sh into the run folder.

Variants: ``baseline`` always; ``mtp`` when the ``infer_mtp`` outcome carries a recommendation
(``tools.mtp.infer.Recommendation``: flags, env, rationale, where each flag comes from); one
``mtp-<steps>-<topk>-<draft>`` per other setting the evidence supports and per ``--mtp-steps`` entry
(agent/steps/measure_plan.py). Before anything is written, SGLang itself resolves each speculative
variant's exact argv (agent/steps/verify_scripts.py: verify/<variant>.json; adjusted values are
used, a variant SGLang refuses is left out). The measure plan is also written as
``measure_plan.json`` so the benchmark step runs exactly what was reviewed.

Step params (all optional): input_len, output_len, prompts_per_concurrency, min_prompts,
warmup_requests, ready_timeout_s, port; extra_flags ({flag: {"value", "origin"}}, set only by the
LLM planner from flags the flag guard accepted).
"""
from __future__ import annotations

import os

from agent.run.run_files import MEASURE_PLAN
from agent.steps.base import PlanStep, StepContext, StepOutcome
from agent.steps.measure_plan import build_plan
from agent.steps.search_step import write_space
from agent.steps.verify_scripts import verify_plan
from tools.base import ToolError
from tools.scripts import MeasurePlan
from tools.measure.script_render import SERVER_CHECK, render_measure_script, render_serve_script, server_check_source


def _multinode(ctx: StepContext, plan: MeasurePlan):
    """``--nodes N`` (N > 1): per-node serve scripts and a Slurm batch script per variant."""
    s, gpu_plan = ctx.settings, ctx.planned_gpus()
    if gpu_plan.nodes <= 1:
        return None
    from tools.scripts.multinode_variants import render_variants_multinode

    written = render_variants_multinode(ctx.run.path, plan.variants, gpu_plan, s.sglang_python, plan.port,
                                        s.dist_init_addr, s.executor.partition)
    for relative in written.files:
        ctx.emit("artifact_written", path=relative, bytes=ctx.run.file(relative).stat().st_size)
    return written


def run(ctx: StepContext, step: PlanStep) -> StepOutcome:
    try:
        plan, notes, left_out = build_plan(ctx, step)
    except ToolError as err:  # e.g. an --mtp-steps setting a hook forbids
        return StepOutcome(kind="write_scripts", status="failed", reason="tool_error", summary=str(err))
    plan, verified = verify_plan(ctx, plan)  # SGLang resolves each speculative variant's exact argv first
    notes += verified
    python = ctx.settings.sglang_python
    texts = {f"serve_{v.name}.sh": render_serve_script(v, python, plan.port) for v in plan.variants}
    texts["run_measure.sh"] = render_measure_script(plan, python)
    for name, text in {**texts, SERVER_CHECK: server_check_source()}.items():  # run_measure.sh's server check
        os.chmod(ctx.write_artifact(name, text), 0o755)
    ctx.write_artifact(MEASURE_PLAN, plan.model_dump_json(indent=2))
    write_space(ctx)  # under --budget: the fenced space, for review before any server starts
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
    if left_out:
        summary += f"; {len(left_out)} setting(s) from the evidence not measured (data.left_out says why)"
    return StepOutcome(kind="write_scripts", status="done", reason="scripts_written", summary=summary,
                       artifacts=[*texts, SERVER_CHECK, MEASURE_PLAN, *(multinode.files if multinode else [])],
                       data={"variants": {v.name: v.model_dump() for v in plan.variants}, "left_out": left_out,
                             "scripts": list(texts), "plan": MEASURE_PLAN,
                             "run_command": f"bash {ctx.run.path / 'run_measure.sh'}"})
