"""Runs plan steps for a lane: take the step's runner from the step table, run it, record its outcome.

Outcomes are files (``steps/<kind>.json``) as well as graph state, so a resumed or re-driven
campaign reuses what finished (``done``/``skipped``) and re-runs the rest. An expected failure
(``ToolError``) is a ``failed`` outcome; anything else propagates and ends the run as ``failed``.
Whether the step really runs or its recorded outcome is served is the record source's business
(``rt.source``). When both lanes have work, the research lane lets the GPU lane launch its first
job before it begins (``let_the_gpu_lane_start_first``).
"""
from __future__ import annotations

import threading
import time

from agent.campaign.preflight import Preflight
from agent.run.folder import REUSABLE_STATUSES as REUSABLE
from agent.run.run_files import step_file
from agent.campaign.runtime import Runtime
from agent.steps.base import PlanStep, StepContext, StepOutcome
from agent.steps.step_table import BY_KIND, kinds_at
from tools.base import ToolError


def make_context(rt: Runtime, preflight: Preflight, outcomes: dict[str, dict], lane: str) -> StepContext:
    return StepContext(
        settings=rt.settings, run=rt.run, trace=rt.trace, executor=rt.executor, gpus=list(preflight.gpus),
        sglang_root=preflight.root, outcomes={k: StepOutcome.model_validate(v) for k, v in outcomes.items()},
        lane=lane, gpu_plan=preflight.gpu_plan, mtp_settings=rt.mtp_settings, checkpoint=preflight.checkpoint,
        checkpoint_config=preflight.checkpoint_config, architecture=preflight.architecture,
    )


def _execute(step: PlanStep, ctx: StepContext) -> StepOutcome:
    try:
        return BY_KIND[step.kind].run(ctx, step)
    except ToolError as err:
        return StepOutcome(kind=step.kind, status="failed", reason="tool_error", summary=f"{step.kind}: {err}")


def made_for_other_gpus(step: PlanStep, previous: StepOutcome, ctx: StepContext) -> str | None:
    """Why a recorded outcome no longer fits the GPUs of this attempt (None: it fits). Scripts name their
    GPUs and TP, so ``write_scripts`` is written again for other ones; finished GPU work (tuned units, measured
    points) is never redone: those steps hand on what is left themselves."""
    if step.kind != "write_scripts" or ctx.gpu_plan is None:  # None: a record from before plans were kept
        return None
    base = (previous.data.get("variants") or {}).get("baseline") or {}
    gpus, tp = ctx.gpu_plan.gpus, ctx.gpu_plan.tp  # preflight's plan for this attempt
    if (base.get("gpus"), base.get("tp")) == (gpus, tp):
        return None
    return f"written for GPUs {base.get('gpus')} with TP {base.get('tp')}, now GPUs {gpus} with TP {tp}"


def run_step(rt: Runtime, step: PlanStep, ctx: StepContext) -> StepOutcome:
    previous = rt.run.step_outcome(step.kind)  # a damaged one stops the run, naming the file
    stale = made_for_other_gpus(step, previous, ctx) if previous is not None and previous.status in REUSABLE else None
    if previous is not None and previous.status in REUSABLE and stale is None:
        rt.trace.emit("progress", step.lane, message=f"{step.kind}: reusing recorded outcome ({previous.status})")
        return previous
    if stale:
        rt.trace.emit("progress", step.lane, message=f"{step.kind}: {stale}: written again")
    rt.trace.emit("tool_call", step.lane, tool=step.kind, args=step.params)
    started = time.monotonic()
    outcome = rt.source.step_outcome(rt.run, step, lambda: _execute(step, ctx))
    rt.run.write_json(step_file(step.kind), outcome.model_dump(mode="json"))
    recorded = outcome.model_dump(mode="json")  # the whole outcome: replay serves it and checks it against the file
    rt.trace.emit("tool_result", step.lane, tool=step.kind, status=outcome.status, summary=outcome.summary,
                  artifacts=outcome.artifacts, reason=recorded["reason"], data=recorded["data"],
                  seconds=round(time.monotonic() - started, 3))
    rt.say(f"[{step.lane}] {step.kind}: {outcome.status} — {outcome.summary}")
    return outcome


def run_lane(rt: Runtime, steps: list[PlanStep], preflight: Preflight, outcomes: dict[str, dict],
             kinds: tuple[str, ...]) -> dict[str, dict]:
    """Run the plan's steps of these kinds in plan order; each sees the outcomes before it."""
    produced: dict[str, dict] = {}
    for step in steps:
        if step.kind not in kinds:
            continue
        ctx = make_context(rt, preflight, {**outcomes, **produced}, step.lane)
        produced[step.kind] = run_step(rt, step, ctx).model_dump(mode="json")
    return produced


GPU_FIRST_WAIT_S = 2.0
_GPU_UNDER_WAY = {"job_launched", "job_state", "tool_result", "node_finished", "error"}


def let_the_gpu_lane_start_first(rt: Runtime, steps: list[PlanStep], preflight: Preflight) -> None:
    """The GPUs are the costly resource: when the GPU lane will start jobs here, the research lane
    begins once it has (at most GPU_FIRST_WAIT_S later); both lanes' Python work at once would
    delay the first GPU job. A replay starts no job: there is nothing to wait for."""
    gpu_jobs = preflight.gpus and not rt.settings.plan_only and any(s.kind in kinds_at("gpu_lane") for s in steps)
    if not gpu_jobs or not rt.source.starts_jobs:
        return
    if rt.early_gpu_lane is not None:  # started before the graph (agent/campaign/early_lane.py): it says when it is
        rt.early_gpu_lane.under_way.wait(GPU_FIRST_WAIT_S)
        return
    _gpu_lane_under_way(rt).wait(GPU_FIRST_WAIT_S)


def _gpu_lane_under_way(rt: Runtime) -> threading.Event:
    """Set once the GPU lane has launched (or re-attached) a job, or ended its step without one."""
    event = threading.Event()

    def watch(e: dict) -> None:  # stays registered (removing it mid-emit would skip the next listener)
        if e.get("lane") == "gpu" and e.get("type") in _GPU_UNDER_WAY:
            event.set()

    rt.trace.listeners.append(watch)
    if any(not job.done for job in rt.executor.jobs()):  # launched before the watch was in place
        event.set()
    return event
