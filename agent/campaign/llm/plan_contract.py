"""The LLM planner's contract: the ``submit_plan`` answer schema, the tools, and turning an answer into steps.

The model researches with read-only tools, then answers with ``submit_plan``: steps from the closed
set of step kinds with closed params, plus optional server flags. Every flag goes through the flag
guard; only accepted ones reach write_scripts (``params["extra_flags"]``). Artifacts:
``llm_tools.json``, ``flag_review.json`` and the plan.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agent.campaign.llm.flag_guard import FlagProposal, review_flags, review_markdown
from agent.campaign.llm.loop import SubmitTool
from agent.campaign.llm.run_tools import make_run_tools
from agent.campaign.preflight import Preflight
from agent.campaign.runtime import Runtime
from agent.steps.base import PlanStep, StepKind
from agent.steps.step_table import STEP_ORDER, plan_step
from agent.campaign.llm.registry import Registry, build_registry


class StepParams(BaseModel):
    model_config = ConfigDict(extra="forbid")  # the model cannot smuggle in params a step would trust
    shapes: list[str] | None = Field(None, description="tune_kernels only: FP8 GEMM shapes 'N,K'")
    concurrency: list[int] | None = Field(None, description="benchmark only: concurrency levels, e.g. [1, 8, 16]")


class ProposedStep(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: StepKind = Field(description="Step kind, from the closed set")
    why: str = Field(description="Why this step serves the goal, in one sentence")
    params: StepParams = Field(default_factory=StepParams, description="Step parameters (most steps take none)")


class PlanAnswer(BaseModel):
    """Submit the campaign plan. Call exactly once, when research is done."""

    model_config = ConfigDict(extra="forbid")
    steps: list[ProposedStep] = Field(min_length=1, description="Steps to run; order is fixed by the campaign")
    extra_flags: list[FlagProposal] = Field(default_factory=list,
                                            description="Optional extra server flags, each with cited evidence")
    rationale: str = Field("", description="Short explanation of the plan for the user")


SUBMIT_PLAN = SubmitTool("submit_plan", PlanAnswer, received="plan received")


def make_registry(rt: Runtime, preflight: Preflight) -> Registry:
    root = preflight.sglang_root
    bindings = {"root": root, "sglang_root": root,
                "package_dir": preflight.sglang_source.package_dir if preflight.sglang_source else None,
                "model_path": rt.settings.model_path, "log_files": [], "nvidia_smi": "nvidia-smi", "sglang": root,
                "sglang_src": root, "sglang_python": rt.settings.sglang_python,
                "version": rt.settings.sglang_version}
    return build_registry(bindings, [("job status/logs", t) for t in make_run_tools(rt.executor)])


def to_steps(answer: PlanAnswer, extra_flags: dict[str, dict[str, str]]) -> list[PlanStep]:
    chosen: dict[str, ProposedStep] = {}
    for step in answer.steps:
        chosen.setdefault(step.kind, step)  # one step per kind, as the lanes run them
    steps = []
    for kind in STEP_ORDER:
        proposed = chosen.get(kind)
        if proposed is None and kind == "write_scripts" and extra_flags:
            proposed = ProposedStep(kind=kind, why="carries the accepted extra flags into the scripts")
        if proposed is None:
            continue
        params = proposed.params.model_dump(exclude_none=True)
        if kind == "write_scripts":
            params["extra_flags"] = extra_flags
        steps.append(plan_step(kind, proposed.why, params))
    return steps


def finish_plan(rt: Runtime, preflight: Preflight, answer: PlanAnswer, registry: Registry
                ) -> tuple[list[PlanStep], str]:
    """The steps and the plan.md sections this planner adds (flag review, tools, rationale)."""
    review = review_flags(answer.extra_flags, preflight.package_dir, preflight.root,
                          rt.settings.accept_unsupported_flags, model=rt.settings.model,
                          allowed_trust=rt.settings.allow_flags,
                          architecture=preflight.architecture, checkpoint=preflight.checkpoint)
    rt.run.write_json("flag_review.json", {**review.model_dump(mode="json"), "accepted": review.accepted})
    rt.trace.emit("artifact_written", "control", path="flag_review.json", rejected=[v.flag for v in review.rejected])
    for verdict in review.rejected:
        rt.say(f"[llm] flag {verdict.flag} rejected: {verdict.reason}")
    steps = to_steps(answer, review.accepted)
    missing = "".join(f"- {k}: {v}\n" for k, v in registry.missing.items()) or "- none\n"
    sections = (f"## Model's rationale\n\n{answer.rationale.strip() or '(none given)'}\n\n{review_markdown(review)}\n"
                f"## Tools the model could call\n\n{', '.join(sorted(registry.tools)) or 'none'}\n\n"
                f"Missing from this build:\n\n{missing}")
    return steps, sections
