"""Graph nodes: thin adapters from state to the functions that do the work."""
from __future__ import annotations

from agent.run.run_files import PLAN, PREFLIGHT
from agent.campaign import planner
from agent.campaign.early_lane import say_preflight
from agent.campaign.gpu_jobs import announce
from agent.campaign.lanes import let_the_gpu_lane_start_first, run_lane
from agent.campaign.llm.planning_nodes import research_wanted
from agent.campaign.preload import import_what_follows_the_gpu_jobs, in_background, wait_for_background
from agent.campaign.preflight import Preflight
from agent.campaign.runtime import Runtime
from agent.campaign.state import CampaignState
from agent.steps.base import PlanStep
from agent.steps.step_table import Node, kinds_at


def _steps(state: CampaignState) -> list[PlanStep]:
    return [PlanStep.model_validate(s) for s in state.get("steps", [])]


def preflight(rt: Runtime, state: CampaignState) -> dict:
    early, rt.early_preflight = rt.early_preflight, None  # found before the graph (written and said if its lane started)
    found = early or rt.source.preflight(rt.settings, rt.executor)
    dump = found.model_dump(mode="json")
    rt.run.write_json(PREFLIGHT, dump)
    if rt.early_gpu_lane is None:
        say_preflight(rt, found)
    return {"preflight": dump}


def plan(rt: Runtime, state: CampaignState) -> dict:
    steps, plan_md, will_not = planner.make_plan(rt, state["goal"], Preflight.of(state))
    rt.run.write_json(PLAN, [s.model_dump(mode="json") for s in steps])
    rt.run.write_text("plan.md", plan_md)
    rt.trace.emit("artifact_written", "control", path="plan.md", bytes=len(plan_md.encode()))
    planner.say_gate(rt, steps, Preflight.of(state))
    for line in will_not:
        rt.say(f"[control] note: {line}")
    if rt.early_gpu_lane is None:  # an early GPU lane was announced before it started
        announce(rt, steps, Preflight.of(state))
    return {"steps": [s.model_dump(mode="json") for s in steps]}


def _run_node(rt: Runtime, state: CampaignState, node: Node) -> dict:
    """Run the plan's steps that the step table gives this node."""
    return run_lane(rt, _steps(state), Preflight.of(state), state.get("outcomes", {}), kinds_at(node))


def sync(rt: Runtime, state: CampaignState) -> dict:
    return {"outcomes": _run_node(rt, state, "sync")}


def gpu_lane(rt: Runtime, state: CampaignState) -> dict:
    return {"outcomes": _run_node(rt, state, "gpu_lane")}


def early_gpu_lane(rt: Runtime, state: CampaignState) -> dict:
    """The update of the GPU lane started before the graph (it traced its own node_started/finished)."""
    return rt.early_gpu_lane.result(_steps(state))


def research_lane(rt: Runtime, state: CampaignState) -> dict:
    steps, preflight, outcomes = _steps(state), Preflight.of(state), state.get("outcomes", {})
    let_the_gpu_lane_start_first(rt, steps, preflight)
    evidence, scripts = kinds_at("research_lane")  # the LLM research, when wanted, runs between them
    done = run_lane(rt, steps, preflight, outcomes, (evidence,))
    if research_wanted(rt, steps):  # with an LLM: it researches the evidence before scripts are written
        from agent.campaign.llm import research as llm_research  # its tools and flag guard: only for a run with an LLM

        accepted = llm_research.research(rt, state["goal"], preflight, {**outcomes, **done})
        steps = llm_research.with_research_flags(steps, accepted)
    done.update(run_lane(rt, steps, preflight, {**outcomes, **done}, (scripts,)))
    if preflight.gpus:  # GPU jobs are running: load what comes after them behind them
        in_background(import_what_follows_the_gpu_jobs)
    return {"outcomes": done}


def join(rt: Runtime, state: CampaignState) -> dict:
    finished = {k: v["status"] for k, v in state.get("outcomes", {}).items()}
    rt.trace.emit("progress", "control", message="lanes joined", outcomes=finished)
    return {}


def measure(rt: Runtime, state: CampaignState) -> dict:
    return {"outcomes": _run_node(rt, state, "measure")}


def report(rt: Runtime, state: CampaignState) -> dict:
    outcomes = state.get("outcomes", {})
    statuses = {v["status"] for v in outcomes.values()}
    status = "failed" if "failed" in statuses else "planned" if "planned" in statuses else "finished"
    wait_for_background()  # matplotlib is drawn by one thread at a time
    from agent.report.build import build_report  # matplotlib: imported only when a report is built
    from agent.report.drawer import hand_measured_plots, plots_drawn_beside
    from agent.report.timeline_view import timeline_sections

    hand_measured_plots(rt.run.path)  # unless the benchmark step did: the drawer draws while the timeline is drawn here
    timeline = timeline_sections(rt.run.path)
    for path in build_report(rt.run.path, extra_sections=timeline, draw_plots=plots_drawn_beside):
        rt.trace.emit("artifact_written", "control", path=str(path.relative_to(rt.run.path)))
    return {"status": status}

