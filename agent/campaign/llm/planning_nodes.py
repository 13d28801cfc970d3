"""The LLM planning loop as graph nodes, so every model turn is its own checkpoint.

    llm_start → llm_turn → after_turn → dispatch_tools → after_dispatch ┬→ llm_turn   (observations sent back)
                                                                       └→ llm_plan   (a valid submit_plan)

``llm_turn`` makes one model call (the budget checked first); ``dispatch_tools`` runs the reply's
tool calls and appends all their observations as one line; ``llm_plan`` reviews the flags and
writes the plan. The messages live in ``llm/conversation.jsonl``, the state holds counters. Nodes
are idempotent against the file: after a kill LangGraph re-runs the uncommitted node, which finds
its line already written and reuses it, so no request is sent and no tool run twice.
"""
from __future__ import annotations

from typing import Literal

from agent.run.run_files import PLAN
from agent.campaign.llm.conversation import CONVERSATION_FILE, Conversation
from agent.campaign.llm.loop import ToolLoop
from agent.campaign.planner import render_plan_md, say_gate, will_not_happen
from agent.campaign.preflight import Preflight
from agent.campaign.gpu_jobs import announce
from agent.campaign.llm.prompts import quote_untrusted, render
from agent.secrets import redact_text
from agent.campaign.runtime import Runtime
from agent.steps.base import PlanStep
from agent.steps.step_table import STEP_ORDER
from agent.campaign.state import CampaignState
from agent.campaign.llm.registry import Registry


class RouteError(Exception):
    """The graph reached a state its routers cannot continue from: a bug, never the user's fault."""


def uses_llm(rt: Runtime) -> bool:
    return bool(rt.settings.llm_base_url) or rt.llm is not None  # a configured endpoint, or a replay client


def research_wanted(rt: Runtime, steps: list[PlanStep]) -> bool:
    """Whether the research lane hands the evidence to the model (agent/campaign/llm/research.py) before scripts."""
    return uses_llm(rt) and any(s.kind == "infer_mtp" for s in steps)


def route_planner(rt: Runtime):
    def route(state: CampaignState) -> Literal["plan", "llm_start"]:
        if "preflight" not in state:
            raise RouteError("planner route reached without a preflight result")
        return "llm_start" if uses_llm(rt) else "plan"

    return route


def after_turn(state: CampaignState) -> Literal["dispatch_tools"]:
    loop = state.get("llm") or {}
    if loop.get("phase") != "replied" or loop.get("turns", 0) < 1:
        raise RouteError(f"after llm_turn the loop must hold a recorded reply; it is in phase "
                         f"{loop.get('phase')!r} after {loop.get('turns', 0)} turns")
    return "dispatch_tools"


def after_dispatch(state: CampaignState) -> Literal["llm_turn", "llm_plan"]:
    loop = state.get("llm") or {}
    phase = loop.get("phase")
    if phase == "observed":
        return "llm_turn"
    if phase == "submitted" and loop.get("answered"):
        return "llm_plan"
    raise RouteError(f"after dispatch_tools the loop must be 'observed' or 'submitted' with an answer; "
                     f"it is in phase {phase!r} (answered={loop.get('answered')!r})")


def _registry(rt: Runtime, preflight: Preflight) -> Registry:
    # Built once per process: importing the tool modules is the cost; the bindings never change in a run.
    # The planner (with its flag guard and evidence tools) is imported by the nodes of a run that has an LLM.
    from agent.campaign.llm.plan_contract import make_registry

    if rt.planner_tools is None:
        rt.planner_tools = make_registry(rt, preflight)
    return rt.planner_tools


def _loop(rt: Runtime, state: CampaignState) -> ToolLoop:
    """The planner's tool loop over its recorded conversation (read fresh: the file is the truth)."""
    from agent.campaign.llm.plan_contract import SUBMIT_PLAN

    return ToolLoop(rt, Conversation.load(rt.run.file(CONVERSATION_FILE)), _registry(rt, Preflight.of(state)),
                    SUBMIT_PLAN, reminder=lambda turns_left: render("plan_reminder", step_kinds=STEP_ORDER,
                                                                    turns_left=turns_left))


def _state(conversation: Conversation, phase: str) -> dict:
    return {"llm": {"conversation": CONVERSATION_FILE, "phase": phase, "turns": conversation.turns,
                    "tokens": conversation.tokens, "seconds": conversation.seconds,
                    "answered": conversation.answer is not None}}


def _preflight_facts(preflight: Preflight) -> dict[str, str]:
    """Each preflight value for the planner's prompt, fenced as untrusted data naming where it was
    read (GPU names come from nvidia-smi, the architecture from a checkpoint's config.json or the tree,
    notes quote paths and tool output: none of it is an instruction)."""
    decided = preflight.architecture
    return {
        "gpus": quote_untrusted(", ".join(g.name for g in preflight.gpus) or "none", "nvidia-smi where the GPU jobs run"),
        "sglang_root": quote_untrusted(preflight.sglang_root or "unresolved", "preflight's SGLang source lookup"),
        "architecture": quote_untrusted(decided.line() if decided else "not decided",
                                        f"{decided.cited}: architectures" if decided and decided.decided_by == "config.json"
                                        else "preflight's architecture decision (tools/checkpoint/architecture.py)"),
        "notes": quote_untrusted("\n".join(f"- {n}" for n in preflight.notes) or "none", "preflight notes"),
    }


def llm_start(rt: Runtime, state: CampaignState) -> dict:
    loop = _loop(rt, state)
    preflight, conversation = Preflight.of(state), loop.conversation
    rt.run.write_json("llm_tools.json", loop.registry.report())
    if conversation.started:  # a resumed attempt continues the recorded conversation
        rt.trace.emit("progress", "llm", message=f"continuing the recorded conversation after "
                                                 f"{conversation.turns} turns", budget=loop.budget().snapshot())
        return _state(conversation, "observed")
    messages = [
        {"role": "system", "content": render("planner_system", model=rt.settings.model, step_kinds=STEP_ORDER,
                                             sglang_version=rt.settings.sglang_version,
                                             max_steps=rt.settings.max_llm_steps)},
        {"role": "user", "content": render(
            "planner_goal", goal=state["goal"], **_preflight_facts(preflight),
            tool_names=sorted(loop.registry.tools), missing=[f"{k} ({v})" for k, v in loop.registry.missing.items()])},
    ]
    conversation.append({"kind": "prompt", "messages": messages})
    return _state(conversation, "observed")


def llm_turn(rt: Runtime, state: CampaignState) -> dict:
    loop = _loop(rt, state)
    loop.turn()  # one model call; a reply recorded before a kill is not sent again
    return _state(loop.conversation, "replied")


def dispatch_tools(rt: Runtime, state: CampaignState) -> dict:
    loop = _loop(rt, state)
    last = loop.conversation.last
    if last is None or last["kind"] == "prompt":
        raise RouteError(f"dispatch_tools needs a recorded reply as the last line of {loop.conversation.path}")
    if loop.observe() and loop.answer is not None:  # tools recorded before a kill are not run again
        rt.trace.emit("progress", "llm", message="plan submitted", budget=loop.budget().snapshot())
    return _state(loop.conversation, "submitted" if loop.answer is not None else "observed")


def llm_plan(rt: Runtime, state: CampaignState) -> dict:
    from agent.campaign.llm.plan_contract import PlanAnswer, finish_plan

    conversation = Conversation.load(rt.run.file(CONVERSATION_FILE))
    if conversation.answer is None:
        raise RouteError(f"llm_plan reached but {conversation.path} holds no accepted plan")
    answer = PlanAnswer.model_validate(conversation.answer)
    preflight = Preflight.of(state)
    steps, sections = finish_plan(rt, preflight, answer, _registry(rt, preflight))
    model = (rt.llm.model if rt.llm else None) or rt.settings.llm_model or "replay"
    who = f"LLM ({model} at {redact_text(rt.settings.llm_base_url or 'replay')})"
    will_not = will_not_happen(steps, preflight)
    plan_md = render_plan_md(state["goal"], steps, [], preflight, who, rt.settings, will_not,
                             rt.run.path.name) + "\n" + sections
    dumps = [s.model_dump(mode="json") for s in steps]
    rt.run.write_json(PLAN, dumps)
    rt.run.write_text("plan.md", plan_md)
    rt.trace.emit("artifact_written", "control", path="plan.md", bytes=len(plan_md.encode()))
    say_gate(rt, steps, preflight)
    for line in will_not:
        rt.say(f"[control] note: {line}")
    announce(rt, steps, preflight)
    return {"steps": dumps}
