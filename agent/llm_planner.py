"""The LLM planner: the model researches with read-only tools, then answers with ``submit_plan``.

The answer is typed: steps from the closed set of step kinds with closed params, plus optional
extra server flags. Every flag goes through the flag guard; only accepted flags reach the
write_scripts step (``params["extra_flags"]``). The client comes from ``rt.extras["llm"]``
(a replay client can be put there) and is built from settings only when absent.
Artifacts: ``llm_tools.json`` (what the model could call and what is missing),
``flag_review.json``, and the plan itself (written by the plan node).
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.budget import Budget
from agent.dispatch import dispatch, traced_args
from agent.flag_guard import FlagProposal, review_flags, review_markdown
from agent.prompts import render
from agent.run_tools import make_run_tools
from agent.runtime import Runtime
from agent.steps.base import PlanStep
from agent.tool_registry import Registry, build_registry

STEP_ORDER = ("sync", "tune_kernels", "infer_mtp", "write_scripts", "benchmark")
STEP_LANES = {"sync": "control", "tune_kernels": "gpu", "infer_mtp": "research", "write_scripts": "research",
              "benchmark": "gpu"}
SUBMIT = "submit_plan"


class StepParams(BaseModel):
    model_config = ConfigDict(extra="forbid")  # the model cannot smuggle in params a step would trust
    shapes: list[str] | None = Field(None, description="tune_kernels only: FP8 GEMM shapes 'N,K'")
    concurrency: list[int] | None = Field(None, description="benchmark only: concurrency levels, e.g. [1, 8, 16]")


class ProposedStep(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["sync", "tune_kernels", "infer_mtp", "write_scripts", "benchmark"] = Field(
        description="Step kind, from the closed set")
    why: str = Field(description="Why this step serves the goal, in one sentence")
    params: StepParams = Field(default_factory=StepParams, description="Step parameters (most steps take none)")


class PlanAnswer(BaseModel):
    """Submit the campaign plan. Call exactly once, when research is done."""

    model_config = ConfigDict(extra="forbid")
    steps: list[ProposedStep] = Field(min_length=1, description="Steps to run; order is fixed by the campaign")
    extra_flags: list[FlagProposal] = Field(default_factory=list,
                                            description="Optional extra server flags, each with cited evidence")
    rationale: str = Field("", description="Short explanation of the plan for the user")


def submit_schema() -> dict:
    params = PlanAnswer.model_json_schema()
    params.pop("title", None)
    return {"type": "function", "function": {"name": SUBMIT, "description": PlanAnswer.__doc__.strip(),
                                             "parameters": params}}


def _client(rt: Runtime):
    llm = rt.extras.get("llm")
    if llm is None:
        from agent.llm import LLMClient

        llm = rt.extras["llm"] = LLMClient(rt.settings, rt.trace)
    return llm


def make_registry(rt: Runtime, preflight: dict) -> Registry:
    source = preflight.get("sglang_source") or {}
    bindings = {"root": preflight.get("sglang_root"), "sglang_root": preflight.get("sglang_root"),
                "package_dir": source.get("package_dir"), "model_path": rt.settings.model_path,
                "log_files": [], "nvidia_smi": "nvidia-smi", "sglang": preflight.get("sglang_root"),
                "sglang_src": preflight.get("sglang_root"), "sglang_python": rt.settings.sglang_python,
                "version": rt.settings.sglang_version}
    return build_registry(bindings, [("job status/logs", t) for t in make_run_tools(rt.executor)])


def _parse_answer(raw_text: str) -> tuple[PlanAnswer | None, str]:
    try:
        return PlanAnswer.model_validate_json(raw_text or "{}"), "status: ok\nplan received"
    except ValidationError as err:
        problems = "\n".join(f"- {'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                             for e in err.errors()[:10])
        return None, f"status: bad_arguments\nThe plan does not fit the submit_plan schema:\n{problems}"


def converse(rt: Runtime, goal: str, preflight: dict, registry: Registry) -> PlanAnswer:
    """Model turns until a valid ``submit_plan``; raises BudgetExhausted when the budget runs out."""
    llm = _client(rt)
    budget = Budget(max_steps=rt.settings.max_llm_steps)
    model_config = preflight.get("model_config") or {}
    messages: list[dict] = [
        {"role": "system", "content": render("planner_system", model=rt.settings.model, step_kinds=STEP_ORDER,
                                             sglang_version=rt.settings.sglang_version, max_steps=budget.max_steps)},
        {"role": "user", "content": render(
            "planner_goal", goal=goal, gpus=", ".join(g.get("name", "?") for g in preflight.get("gpus", [])) or "none",
            sglang_root=preflight.get("sglang_root") or "unresolved", notes=preflight.get("notes", []),
            model_config=model_config.get("architectures") or "not given", tool_names=sorted(registry.tools),
            missing=[f"{k} ({v})" for k, v in registry.missing.items()])},
    ]
    tools = registry.schemas() + [submit_schema()]
    while True:
        budget.before_turn()
        reply = llm.chat(messages, tools)
        budget.charge(reply.get("usage") or {})
        calls = reply.get("tool_calls") or []
        messages.append({"role": "assistant", "content": reply.get("content"), **({"tool_calls": calls} if calls else {})})
        if not calls:
            messages.append({"role": "user", "content": render("plan_reminder", step_kinds=STEP_ORDER,
                                                               turns_left=budget.steps_left)})
            continue
        answer = None
        for call in calls:
            if call["function"]["name"] == SUBMIT and answer is None:
                rt.trace.emit("tool_call", "llm", tool=SUBMIT, call_id=call.get("id", ""),
                              args=traced_args(call["function"].get("arguments", "")))
                answer, text = _parse_answer(call["function"].get("arguments", ""))
                rt.trace.emit("tool_result", "llm", tool=SUBMIT, call_id=call.get("id", ""),
                              status="ok" if answer else "bad_arguments", summary=text.splitlines()[-1] if answer else "bad_arguments")
            else:
                text = dispatch(registry, call, rt.trace).text
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": text})
        if answer is not None:
            rt.trace.emit("progress", "llm", message="plan submitted", budget=budget.snapshot())
            return answer


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
        steps.append(PlanStep(kind=kind, lane=STEP_LANES[kind], why=proposed.why, params=params))
    return steps


def plan_with_llm(rt: Runtime, goal: str, preflight: dict) -> tuple[list[PlanStep], str]:
    """The steps and the plan.md sections this planner adds (flag review, tools, rationale)."""
    registry = make_registry(rt, preflight)
    rt.run.write_json("llm_tools.json", registry.report())
    answer = converse(rt, goal, preflight, registry)
    source = preflight.get("sglang_source") or {}
    package_dir = Path(source["package_dir"]) if source.get("package_dir") else None
    root = Path(preflight["sglang_root"]) if preflight.get("sglang_root") else None
    review = review_flags(answer.extra_flags, package_dir, root, rt.settings.accept_unsupported_flags)
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
