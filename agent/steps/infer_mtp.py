"""Step adapter: the campaign's MTP settings (tools/mtp/settings.py), recorded in the run folder.

Writes ``mtp.json`` (the evidence answer) and ``evidence.md`` for the reader; idempotent (re-running
overwrites both). The outcome's ``data["settings"]`` is the judged ``MtpSettings``: later steps read
it with ``mtp_settings_of(outcomes)``, never the files. Settings the campaign already worked out
on the same tree (by the sync step after pulling, on the same inputs; or ``--mtp-steps``, checked up
front) are taken as they are, not worked out again.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agent.run.run_files import MTP_ANSWER
from agent.settings.model import Settings
from agent.steps.base import PlanStep, StepContext, StepOutcome
from tools.base import ToolError
from tools.gpu_choice import GpuChoice
from tools.gpus import GpuInfo

if TYPE_CHECKING:  # the evidence engine is imported when it runs (not on the way to the first GPU job)
    from tools.checkpoint.facts import CheckpointFacts
    from tools.checkpoint.architecture import Architecture
    from tools.mtp.settings import MtpSettings, MtpSettingsArgs


def mtp_inputs(settings: Settings, root: Path | None, gpus: list[GpuInfo], tp: int | None,
               checkpoint: CheckpointFacts | None = None, architecture: Architecture | None = None) -> MtpSettingsArgs:
    """What the campaign's MTP settings are judged on (the same for the up-front check and the step);
    ``architecture`` is preflight's decision (the up-front check, before preflight, decides it the same way)."""
    from tools.mtp.settings import MtpSettingsArgs

    return MtpSettingsArgs(
        model=settings.model, arch=settings.arch, model_path=settings.model_path, architecture=architecture,
        sglang=str(root) if root else settings.sglang_src, sglang_python=settings.sglang_python,
        version=settings.sglang_version, gpu=gpus[0].name if gpus else None, gpus=len(gpus) or None, tp=tp,
        mtp_steps=list(settings.mtp_steps), mtp_variants=settings.mtp_variants, checkpoint=checkpoint,
        search=settings.budget is not None)


def settings_record(found: MtpSettings | None) -> dict | None:
    """``found`` as JSON for an outcome, its evidence answer kept (the step writes it to mtp.json)."""
    if found is None or found.answer is None:
        return None
    return {**found.model_dump(mode="json"), "answer": found.answer.model_dump(mode="json")}


def after_pull(outcomes: dict[str, StepOutcome]) -> MtpSettings | None:
    """The settings the sync step judged on the tree after pulling (None: it judged none)."""
    from tools.mtp.settings import MtpSettings

    sync = outcomes.get("sync")
    record = sync.data.get("mtp_after") if sync is not None else None
    return MtpSettings.model_validate(record) if record else None


def _worked_out(ctx: StepContext) -> MtpSettings:
    from tools.mtp.settings import judged_on, mtp_settings, tree_commit

    tp = ctx.gpu_plan.tp if ctx.gpu_plan else None
    wanted = mtp_inputs(ctx.settings, ctx.sglang_root, ctx.gpus, tp, ctx.checkpoint, ctx.architecture)
    pulled = after_pull(ctx.outcomes)
    if judged_on(pulled, wanted):
        return pulled
    given = ctx.mtp_settings  # judged up front: taken unless a pull has moved its tree since
    decided = wanted.architecture.name if wanted.architecture else given.architecture if given else None
    if (given is not None and given.answer is not None and given.architecture == decided
            and given.source.commit == tree_commit(given.source.root)):
        return given
    return mtp_settings(wanted)


def run(ctx: StepContext, step: PlanStep) -> StepOutcome:
    from tools.mtp.render import evidence_markdown

    try:
        found = _worked_out(ctx)
    except ToolError as err:
        return StepOutcome(kind="infer_mtp", status="failed", reason="inference_failed",
                           summary=f"MTP inference failed: {err}", data={"answer": None, "settings": None})
    answer = found.answer
    ctx.write_artifact(MTP_ANSWER, answer.model_dump_json(indent=2))
    ctx.write_artifact("evidence.md", evidence_markdown(answer))
    recommended = found.recommended
    # One span per step (the lane's tool_call/tool_result): what the inference read and found is a fact in it.
    ctx.progress(f"MTP evidence for {answer.model}: {answer.architecture}, {len(answer.candidates)} candidate(s), "
                 f"{len(answer.constraints)} constraint(s)", inputs=found.inputs.model_dump(),
                 architecture=answer.architecture, candidates=len(answer.candidates),
                 constraints=len(answer.constraints), recommended=recommended.flags if recommended else None)
    if recommended:
        flags = " ".join(f"{k} {v}".strip() for k, v in recommended.flags.items())
        summary = f"MTP for {answer.model} ({answer.architecture}): {flags}"
    else:
        summary = f"no MTP recommendation: {found.no_evidence}"
    return StepOutcome(kind="infer_mtp", status="done", reason="recommended" if recommended else "no_recommendation",
                       summary=summary, artifacts=[MTP_ANSWER, "evidence.md"],
                       data={"answer": MTP_ANSWER, "settings": found.model_dump(mode="json")})


def mtp_settings_of(outcomes: dict[str, StepOutcome]) -> MtpSettings | None:
    """The settings an earlier ``infer_mtp`` outcome carries (its data is JSON: validated here, once)."""
    from tools.mtp.settings import MtpSettings

    infer = outcomes.get("infer_mtp")
    found = infer.data.get("settings") if infer is not None else None
    return MtpSettings.model_validate(found) if found else None


def up_front(settings: Settings, checked: GpuChoice) -> MtpSettings:
    """``--mtp-steps`` judged before the run starts, on the GPUs just checked (ToolError: the entry and the
    fix); the step takes the result as it is."""
    from tools.mtp.settings import mtp_settings

    return mtp_settings(mtp_inputs(settings, None, checked.gpus, checked.plan.tp))
