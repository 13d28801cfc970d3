"""The LLM research lane: while the GPU jobs run, the model investigates what the evidence engine left open.

Runs between ``infer_mtp`` and ``write_scripts`` when an LLM is configured. The model gets the
evidence as quoted, attributed data and read-only tools, and answers with ``submit_notes``:
``research_notes.md`` keeps only claims whose ``path:line`` citations a recorded tool result showed,
and flag proposals reach ``write_scripts`` only through the flag guard (the planner's flags win a
clash); the model never edits a script. The conversation (``llm/research.jsonl``) is what a resume
continues from, so no reply is sent twice; the budget is shared with the planner. The whole lane is
one span (``llm_research``, outcome ``llm/research.json``) that a replay serves from the record.
"""
from __future__ import annotations

import json
import time

from agent.campaign.llm.budget import BudgetExhausted
from agent.campaign.llm.dispatch import MAX_CHARS
from agent.campaign.llm.flag_guard import review_flags
from agent.campaign.llm.conversation import CONVERSATION_FILE, Conversation
from agent.campaign.llm.loop import ToolLoop
from agent.campaign.llm.plan_contract import make_registry
from agent.campaign.llm.research_notes import SUBMIT_NOTES, ResearchAnswer, check_claims, notes_markdown, seen_in
from agent.campaign.llm.prompts import quote_untrusted, render
from agent.campaign.preflight import Preflight
from agent.campaign.runtime import Runtime
from agent.run.run_files import MTP_ANSWER
from agent.steps.base import PlanStep
from agent.campaign.llm.registry import Registry

TOOL = "llm_research"
LANE = "research"
RESEARCH_FILE = "llm/research.jsonl"
OUTCOME_FILE = "llm/research.json"
NOTES_FILE = "research_notes.md"
CAPABILITIES = ("search", "bounded file read", "recipe extraction", "constraints", "spec flag catalog")
REUSABLE = ("done", "skipped")


def research_registry(rt: Runtime, preflight: Preflight) -> Registry:
    """The planner's registry cut down to the read-only research capabilities."""
    if rt.research_tools is None:
        full = make_registry(rt, preflight)
        kept = {n: t for n, t in full.tools.items() if t.capability in CAPABILITIES}
        withheld = {**full.withheld, **{n: "not a research tool" for n in full.tools if n not in kept}}
        rt.research_tools = Registry(
            tools=kept, missing={k: v for k, v in full.missing.items() if k in CAPABILITIES}, withheld=withheld)
    return rt.research_tools


def with_research_flags(steps: list[PlanStep], accepted: dict[str, dict]) -> list[PlanStep]:
    """write_scripts gets the guard-accepted research flags after the planner's (the planner's value wins)."""
    if not accepted:
        return steps
    out = []
    for step in steps:
        if step.kind == "write_scripts":
            planner = step.params.get("extra_flags") or {}
            merged = {**planner, **{f: v for f, v in accepted.items() if f not in planner}}
            step = step.model_copy(update={"params": {**step.params, "extra_flags": merged}})
        out.append(step)
    return out


def research(rt: Runtime, goal: str, preflight: Preflight, outcomes: dict[str, dict]) -> dict[str, dict]:
    """Run (or reuse, or serve in replay) the research span; the guard-accepted flags it yields."""
    path = rt.run.file(OUTCOME_FILE)
    previous = rt.run.json_object(OUTCOME_FILE)  # a damaged one stops the run, naming it
    if previous is not None and previous.get("status") in REUSABLE:
        rt.trace.emit("progress", LANE, message=f"{TOOL}: reusing recorded outcome ({previous['status']})")
        return previous.get("accepted_flags") or {}
    registry = research_registry(rt, preflight)
    rt.trace.emit("tool_call", LANE, tool=TOOL, args={"conversation": RESEARCH_FILE, "tools": sorted(registry.tools)})
    started = time.monotonic()

    def investigate() -> dict:
        outcome = _investigate(rt, goal, preflight, outcomes, registry)
        rt.run.write_json(OUTCOME_FILE, outcome)
        return outcome

    outcome = rt.source.span_outcome(rt.run, TOOL, path, investigate)
    rt.trace.emit("tool_result", LANE, tool=TOOL, status=outcome["status"], summary=outcome["summary"],
                  artifacts=outcome.get("artifacts", []), seconds=round(time.monotonic() - started, 3))
    rt.say(f"[{LANE}] {TOOL}: {outcome['status']} — {outcome['summary']}")
    return outcome.get("accepted_flags") or {}


def _evidence(rt: Runtime, outcomes: dict[str, dict]) -> str:
    step = outcomes.get("infer_mtp") or {}
    shown: dict = {"step_status": step.get("status"), "summary": step.get("summary", "")}
    answer = rt.run.json_object(MTP_ANSWER)  # as written: the LLM reads the file, every field of it
    if answer is not None:
        shown["answer"] = answer
    text = json.dumps(shown, indent=1, default=str)
    if len(text) > MAX_CHARS * 2:
        text = text[:MAX_CHARS * 2] + f"\n[... {len(text) - MAX_CHARS * 2} more characters cut; read mtp.json's " \
                                       "origins with the tools]"
    return quote_untrusted(text, "mtp.json and steps/infer_mtp.json (the infer_mtp step's answer)")


def _start(rt: Runtime, goal: str, outcomes: dict[str, dict], loop: ToolLoop) -> None:
    registry = loop.registry
    messages = [
        {"role": "system", "content": render("research_system", model=rt.settings.model,
                                             sglang_version=rt.settings.sglang_version,
                                             turns_left=loop.budget().steps_left)},
        {"role": "user", "content": render("research_task", goal=goal, evidence=_evidence(rt, outcomes),
                                           tool_names=sorted(registry.tools),
                                           missing=[f"{k} ({v})" for k, v in registry.missing.items()])},
    ]
    loop.conversation.append({"kind": "prompt", "messages": messages})


def _loop(rt: Runtime, registry: Registry) -> ToolLoop:
    """The research conversation's tool loop; its turns count against the planner's budget too."""
    planner = Conversation.load(rt.run.file(CONVERSATION_FILE))
    return ToolLoop(rt, Conversation.load(rt.run.file(RESEARCH_FILE)), registry, SUBMIT_NOTES,
                    reminder=lambda turns_left: render("research_reminder", turns_left=turns_left),
                    purpose="research notes", shares_budget_with=(planner,))


def _investigate(rt: Runtime, goal: str, preflight: Preflight, outcomes: dict[str, dict], registry: Registry) -> dict:
    from agent.campaign.llm.client import LLMError  # imports openai: only on the LLM path

    loop = _loop(rt, registry)
    conversation = loop.conversation
    if not conversation.started:
        _start(rt, goal, outcomes, loop)
    elif conversation.turns:
        rt.trace.emit("progress", LANE, message=f"{TOOL}: continuing the recorded conversation after "
                                                f"{conversation.turns} turns")
    ended = "the model submitted its notes"
    try:
        while loop.answer is None:
            loop.advance()
    except BudgetExhausted as err:
        ended = f"stopped early: {err}"
    except LLMError as err:
        return {"status": "failed", "summary": f"research stopped: {err}", "artifacts": [RESEARCH_FILE, OUTCOME_FILE],
                "accepted_flags": {}}
    return _finish(rt, preflight, conversation, ended)


def _finish(rt: Runtime, preflight: Preflight, conversation: Conversation, ended: str) -> dict:
    answer = ResearchAnswer.model_validate(conversation.answer or {})
    checked = check_claims(answer.claims, seen_in(conversation.messages()), preflight.root)
    review = review_flags(answer.flag_proposals, preflight.package_dir, preflight.root,
                          rt.settings.accept_unsupported_flags, model=rt.settings.model,
                          allowed_trust=rt.settings.allow_flags,
                          architecture=preflight.architecture, checkpoint=preflight.checkpoint)
    for verdict in review.rejected:
        rt.say(f"[{LANE}] research flag {verdict.flag} rejected: {verdict.reason}")
    model = (rt.llm.model if rt.llm else None) or rt.settings.llm_model or "the LLM"
    text = notes_markdown(f"the LLM ({model})", checked, review, answer.open_questions, ended)
    rt.run.write_text(NOTES_FILE, text)
    rt.trace.emit("artifact_written", LANE, path=NOTES_FILE, bytes=len(text.encode()))
    kept = sum(1 for c in checked if c.kept)
    dropped = len(checked) - kept
    status = "skipped" if conversation.turns == 0 else "done"
    summary = (f"{kept} cited claim(s) kept, {dropped} uncited dropped; flags: {len(review.accepted)} accepted, "
               f"{len(review.rejected)} rejected" + ("" if conversation.answer else f"; {ended}"))
    return {"status": status, "summary": summary, "artifacts": [NOTES_FILE, RESEARCH_FILE, OUTCOME_FILE],
            "accepted_flags": review.accepted, "rejected_flags": [v.flag for v in review.rejected],
            "claims_kept": kept, "claims_dropped": dropped,
            "flag_review": review.model_dump(mode="json")}
