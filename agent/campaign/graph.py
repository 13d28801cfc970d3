"""The campaign graph. Nodes only adapt: each calls one function and records what it did.

    preflight ┬→ plan (playbook) ───────────────────────────────────┬→ sync → ┬ gpu_lane ──────┬→ join → measure → report
              └→ llm_start → llm_turn ⇄ dispatch_tools → llm_plan ──┘         └ research_lane ─┘

With an LLM, each model turn and each round of tool calls is its own node, so each commits a
checkpoint. The two lanes run in one superstep (two threads), so research happens while GPU jobs
run. Every node is idempotent: after a kill LangGraph re-runs the uncommitted nodes, steps reuse
recorded outcomes, jobs re-attach by key and recorded LLM turns are not re-sent.
"""
from __future__ import annotations

import time
from typing import Callable

from langgraph.graph import END, START, StateGraph

from agent.campaign import nodes
from agent.campaign.llm import planning_nodes as llm
from agent.settings.model import Settings
from agent.campaign.runtime import Runtime
from agent.campaign.state import CampaignState
from agent.steps.step_table import node_lane


def traced(rt: Runtime, name: str, lane: str, fn: Callable[[Runtime, CampaignState], dict]):
    def node(state: CampaignState) -> dict:
        rt.trace.emit("node_started", lane, node=name)
        started = time.monotonic()
        update = fn(rt, state)
        rt.trace.emit("node_finished", lane, node=name, ms=round((time.monotonic() - started) * 1000, 2))
        return update

    node.__name__ = name  # no functools.wraps: LangGraph reads the wrapped signature
    return node


def gpu_lane_node(rt: Runtime):
    """The GPU lane's node; a lane started before the graph (agent/campaign/early_lane.py) is waited for instead,
    once: it traced its own start and finish."""
    run_here = traced(rt, "gpu_lane", node_lane("gpu_lane"), nodes.gpu_lane)

    def gpu_lane(state: CampaignState) -> dict:
        if rt.early_gpu_lane is not None:
            return nodes.early_gpu_lane(rt, state)
        return run_here(state)

    return gpu_lane


def recursion_limit(settings: Settings) -> int:
    """Supersteps a campaign may take: the fixed nodes plus two per LLM turn (turn + dispatch)."""
    return 50 + 2 * settings.max_llm_steps


def build_graph(rt: Runtime, checkpointer):
    g = StateGraph(CampaignState)
    g.add_node("preflight", traced(rt, "preflight", "control", nodes.preflight))
    g.add_node("plan", traced(rt, "plan", "control", nodes.plan))
    g.add_node("llm_start", traced(rt, "llm_start", "llm", llm.llm_start))
    g.add_node("llm_turn", traced(rt, "llm_turn", "llm", llm.llm_turn))
    g.add_node("dispatch_tools", traced(rt, "dispatch_tools", "llm", llm.dispatch_tools))
    g.add_node("llm_plan", traced(rt, "llm_plan", "control", llm.llm_plan))
    # the nodes that run steps work in their steps' lane (agent/steps/step_table.py)
    g.add_node("sync", traced(rt, "sync", node_lane("sync"), nodes.sync))
    g.add_node("gpu_lane", gpu_lane_node(rt))
    g.add_node("research_lane", traced(rt, "research_lane", node_lane("research_lane"), nodes.research_lane))
    g.add_node("join", traced(rt, "join", "control", nodes.join))
    g.add_node("measure", traced(rt, "measure", node_lane("measure"), nodes.measure))
    g.add_node("report", traced(rt, "report", "control", nodes.report))
    g.add_edge(START, "preflight")
    g.add_conditional_edges("preflight", llm.route_planner(rt))
    g.add_edge("llm_start", "llm_turn")
    g.add_conditional_edges("llm_turn", llm.after_turn)
    g.add_conditional_edges("dispatch_tools", llm.after_dispatch)
    g.add_edge("plan", "sync")
    g.add_edge("llm_plan", "sync")
    g.add_edge("sync", "gpu_lane")
    g.add_edge("sync", "research_lane")
    g.add_edge(["gpu_lane", "research_lane"], "join")
    g.add_edge("join", "measure")
    g.add_edge("measure", "report")
    g.add_edge("report", END)
    return g.compile(checkpointer=checkpointer)
