"""The GPU lane started before the graph exists: a fresh campaign's first GPU job does not wait for LangGraph.

LangGraph (with langchain_core and langsmith) takes longer to import than everything else the first GPU
job needs, and the GPU lane's steps need nothing the graph's earlier nodes make when the plan is the
playbook's and holds no ``sync`` step (a pull changes the tree the tuning reads). Then ``start_early``
finds the preflight (written to preflight.json, as the preflight node does), plans the steps, says which
jobs will start, and runs the GPU lane on its own thread; the graph is imported once its first job is
launched. The graph's preflight node takes the preflight found here, its plan node plans the same steps,
and its ``gpu_lane`` node waits for this lane and hands on its outcomes (agent/campaign/graph.py).

What the trace holds is the same lane by lane, which is how a replay compares it (agent/replay/checker.py):
the GPU lane's events come earlier beside the control lane's, no event is added or left out. A replay
starts the lane early on the same facts (its preflight and plan are the record's), so a run killed at any
point, here included, replays as it ran. This module imports neither LangGraph nor the research or report
code (tests/test_early_lane.py holds it to that).
"""
from __future__ import annotations

import threading
import time

from agent.run.run_files import PREFLIGHT
from agent.campaign.lanes import run_lane
from agent.campaign.playbook import plan_goal
from agent.campaign.preflight import Preflight
from agent.campaign.runtime import Runtime
from agent.steps.base import PlanStep
from agent.steps.step_table import kinds_at, node_lane

FIRST_JOB_WAIT_S = 30.0  # the graph waits at most this long for the lane's first launch (an SSH one, say)
_STARTED: list["EarlyLane"] = []


class EarlyLane:
    """The GPU lane's node, run on its own thread; ``result`` hands its update to the graph's node."""

    def __init__(self, rt: Runtime, steps: list[PlanStep], preflight: Preflight):
        self.rt, self.steps, self.preflight = rt, steps, preflight
        self._update: dict | None = None
        self._error: BaseException | None = None
        self.under_way = threading.Event()  # set at the lane's first launch, or when it ends without one
        rt.trace.listeners.append(self._watch)
        self.thread = threading.Thread(target=self._work, name="early-gpu-lane", daemon=True)

    def _watch(self, event: dict) -> None:  # stays registered: removing it mid-emit would skip the next listener
        if event.get("lane") == "gpu" and event.get("type") in ("job_launched", "job_state", "tool_result"):
            self.under_way.set()

    def _work(self) -> None:
        lane = node_lane("gpu_lane")
        try:
            self.rt.trace.emit("node_started", lane, node="gpu_lane")
            started = time.monotonic()
            outcomes = run_lane(self.rt, self.steps, self.preflight, {}, kinds_at("gpu_lane"))
            self.rt.trace.emit("node_finished", lane, node="gpu_lane",
                               ms=round((time.monotonic() - started) * 1000, 2))
            self._update = {"outcomes": outcomes}
        except BaseException as err:  # raised again in the graph's gpu_lane node, where the node would raise it
            self._error = err
        finally:
            self.under_way.set()

    def result(self, steps: list[PlanStep]) -> dict:
        """The lane's update, once it ended; ``steps`` are the graph's plan, which must be the lane's."""
        self.thread.join()
        if self._error is not None:
            raise self._error
        if [s.model_dump() for s in steps] != [s.model_dump() for s in self.steps]:
            raise RuntimeError("the graph planned other steps than the GPU lane started early with")
        return self._update or {}

    def wait_for_first_job(self) -> None:
        self.under_way.wait(FIRST_JOB_WAIT_S)


def start_early(rt: Runtime) -> EarlyLane | None:
    """Start the GPU lane of a fresh attempt now, if nothing before it in the graph can change its work
    (None: the graph runs it in its turn). Decided from the settings, the preflight and the plan alone,
    so a replay of the run decides the same."""
    s = rt.settings
    if s.llm_base_url or rt.llm is not None or s.plan_only:  # an LLM plans in the graph; --plan-only starts no job
        return None
    # found once: the graph's preflight node takes it whether or not the lane starts here
    preflight = rt.early_preflight = rt.source.early_preflight(s, rt.executor)
    if preflight is None or not preflight.gpus:
        return None
    steps, _ignored = plan_goal(rt.goal, pull=s.pull, measure=s.measure_params())
    kinds = {step.kind for step in steps}
    if kinds & set(kinds_at("sync")) or not kinds & set(kinds_at("gpu_lane")):
        return None
    rt.run.write_json(PREFLIGHT, preflight.model_dump(mode="json"))
    say_preflight(rt, preflight)
    from agent.campaign.gpu_jobs import announce

    announce(rt, steps, preflight)
    lane = rt.early_gpu_lane = EarlyLane(rt, steps, preflight)
    _STARTED.append(lane)
    lane.thread.start()
    return lane


def wait_for_early_lanes(timeout_s: float) -> None:
    """Join the lanes started early (a replay, before it re-drives the next attempt)."""
    while _STARTED:
        _STARTED.pop().thread.join(timeout_s)


def say_preflight(rt: Runtime, found: Preflight) -> None:
    gpus = ", ".join(f"{g.index}:{g.name}" for g in found.gpus) or "none"
    rt.say(f"[control] preflight: GPUs {gpus}; SGLang source {found.sglang_root or 'unresolved'}")
    for note in found.notes:
        rt.say(f"[control] note: {note}")
