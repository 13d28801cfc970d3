"""The campaign graph. Nodes only adapt: each calls one function and records what it did.

    preflight → plan → sync → ┬ gpu_lane ──────┬→ join → measure → report → END
                              └ research_lane ─┘

The two lanes run in the same superstep (LangGraph runs them on two threads), so research
happens while the GPU jobs run. Every node is idempotent: after a hard kill LangGraph re-runs
the nodes that had not committed, steps reuse recorded outcomes and jobs re-attach by key.
"""
from __future__ import annotations

import time
from typing import Callable

from langgraph.graph import END, START, StateGraph

from agent import nodes
from agent.runtime import Runtime
from agent.state import CampaignState


def traced(rt: Runtime, name: str, lane: str, fn: Callable[[Runtime, CampaignState], dict]):
    def node(state: CampaignState) -> dict:
        rt.trace.emit("node_started", lane, node=name)
        started = time.monotonic()
        update = fn(rt, state)
        rt.trace.emit("node_finished", lane, node=name, ms=round((time.monotonic() - started) * 1000, 2))
        return update

    node.__name__ = name  # no functools.wraps: LangGraph reads the wrapped signature
    return node


def build_graph(rt: Runtime, checkpointer):
    g = StateGraph(CampaignState)
    g.add_node("preflight", traced(rt, "preflight", "control", nodes.preflight))
    g.add_node("plan", traced(rt, "plan", "control", nodes.plan))
    g.add_node("sync", traced(rt, "sync", "control", nodes.sync))
    g.add_node("gpu_lane", traced(rt, "gpu_lane", "gpu", nodes.gpu_lane))
    g.add_node("research_lane", traced(rt, "research_lane", "research", nodes.research_lane))
    g.add_node("join", traced(rt, "join", "control", nodes.join))
    g.add_node("measure", traced(rt, "measure", "gpu", nodes.measure))
    g.add_node("report", traced(rt, "report", "control", nodes.report))
    g.add_edge(START, "preflight")
    g.add_edge("preflight", "plan")
    g.add_edge("plan", "sync")
    g.add_edge("sync", "gpu_lane")
    g.add_edge("sync", "research_lane")
    g.add_edge(["gpu_lane", "research_lane"], "join")
    g.add_edge("join", "measure")
    g.add_edge("measure", "report")
    g.add_edge("report", END)
    return g.compile(checkpointer=checkpointer)
