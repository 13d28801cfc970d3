"""Step adapter: infer the MTP flags for the campaign's model and record them in the run folder.

Writes ``mtp.json`` (the MtpAnswer) and ``evidence.md``; idempotent (re-running overwrites both).
"""
from __future__ import annotations

from agent.steps.base import PlanStep, StepContext, StepOutcome
from tools.base import ToolError
from tools.mtp.infer import InferMtpArgs, infer_mtp
from tools.mtp.render import evidence_markdown


def run(ctx: StepContext, step: PlanStep) -> StepOutcome:
    settings = ctx.settings
    args = InferMtpArgs(
        sglang=str(ctx.sglang_root) if ctx.sglang_root else settings.sglang_src,
        model=settings.model, model_path=settings.model_path, arch=step.params.get("arch"),
        gpu=ctx.gpus[0].name if ctx.gpus else None, gpus=len(ctx.gpus) or None,
        sglang_python=settings.sglang_python, version=settings.sglang_version)
    ctx.emit("tool_call", tool="infer_mtp", args=args.model_dump())
    try:
        answer = infer_mtp(args)
    except ToolError as err:
        ctx.emit("tool_result", tool="infer_mtp", status="error", error=str(err))
        return StepOutcome(kind="infer_mtp", status="failed", summary=f"MTP inference failed: {err}",
                           data={"answer": None, "recommended": None})
    ctx.write_artifact("mtp.json", answer.model_dump_json(indent=2))
    ctx.write_artifact("evidence.md", evidence_markdown(answer))
    recommended = answer.recommended.model_dump(mode="json") if answer.recommended else None
    ctx.emit("tool_result", tool="infer_mtp", status="ok", architecture=answer.architecture,
             candidates=len(answer.candidates), constraints=len(answer.constraints),
             recommended=recommended["flags"] if recommended else None)
    if recommended:
        flags = " ".join(f"{k} {v}".strip() for k, v in answer.recommended.flags.items())  # type: ignore[union-attr]
        summary = f"MTP for {answer.model} ({answer.architecture}): {flags}"
    else:
        summary = f"no MTP recommendation for {answer.model}: " + "; ".join(answer.unknowns[-2:])
    return StepOutcome(kind="infer_mtp", status="done", summary=summary, artifacts=["mtp.json", "evidence.md"],
                       data={"answer": "mtp.json", "recommended": recommended})
