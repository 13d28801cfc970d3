"""Step adapter: infer the MTP flags for the campaign's model and record them in the run folder.

Writes ``mtp.json`` (the MtpAnswer) and ``evidence.md``; idempotent (re-running overwrites both).
The outcome's ``data["recommended"]`` is the ``Recommendation``'s dump; later steps read it back
with ``recommendation(outcomes)``.
"""
from __future__ import annotations

from agent.steps.base import PlanStep, StepContext, StepOutcome
from tools.base import ToolError
from tools.mtp.infer import InferMtpArgs, Recommendation, infer_mtp
from tools.mtp.render import evidence_markdown


def run(ctx: StepContext, step: PlanStep) -> StepOutcome:
    settings = ctx.settings
    args = InferMtpArgs(
        sglang=str(ctx.sglang_root) if ctx.sglang_root else settings.sglang_src,
        model=settings.model, model_path=settings.model_path, arch=step.params.get("arch") or settings.arch,
        gpu=ctx.gpus[0].name if ctx.gpus else None, gpus=len(ctx.gpus) or None,
        sglang_python=settings.sglang_python, version=settings.sglang_version)
    try:
        answer = infer_mtp(args)
    except ToolError as err:
        return StepOutcome(kind="infer_mtp", status="failed", reason="inference_failed",
                           summary=f"MTP inference failed: {err}",
                           data={"answer": None, "recommended": None})
    ctx.write_artifact("mtp.json", answer.model_dump_json(indent=2))
    ctx.write_artifact("evidence.md", evidence_markdown(answer))
    recommended = answer.recommended
    # One span per step (the lane's tool_call/tool_result): what the inference read and found is a fact in it.
    ctx.progress(f"MTP evidence for {answer.model}: {answer.architecture}, {len(answer.candidates)} candidate(s), "
                 f"{len(answer.constraints)} constraint(s)", inputs=args.model_dump(), architecture=answer.architecture,
                 candidates=len(answer.candidates), constraints=len(answer.constraints),
                 recommended=recommended.flags if recommended else None)
    if recommended:
        flags = " ".join(f"{k} {v}".strip() for k, v in recommended.flags.items())
        summary = f"MTP for {answer.model} ({answer.architecture}): {flags}"
    else:
        summary = f"no MTP recommendation for {answer.model}: " + "; ".join(answer.unknowns[-2:])
    return StepOutcome(kind="infer_mtp", status="done", reason="recommended" if recommended else "no_recommendation",
                       summary=summary, artifacts=["mtp.json", "evidence.md"],
                       data={"answer": "mtp.json",
                             "recommended": recommended.model_dump(mode="json") if recommended else None})


def recommendation(outcomes: dict[str, StepOutcome]) -> Recommendation | None:
    """The recommendation an earlier ``infer_mtp`` outcome carries (its data is JSON: validated here, once)."""
    infer = outcomes.get("infer_mtp")
    recommended = infer.data.get("recommended") if infer is not None else None
    return Recommendation.model_validate(recommended) if recommended else None
