"""Say, before any GPU job starts, which jobs the campaign will start on which GPUs."""
from __future__ import annotations

from agent.campaign.preflight import Preflight
from agent.campaign.runtime import Runtime
from agent.steps.base import PlanStep

_WHAT = {"tune_kernels": "kernel tuning, one job per GPU (plus a discovery boot of the baseline server when no "
                         "shapes are known)",
         "benchmark": "one server per variant, then one bench client per concurrency level (no GPU)"}


def announce(rt: Runtime, steps: list[PlanStep], preflight: Preflight) -> None:
    kinds = [s.kind for s in steps if s.kind in _WHAT]
    if not kinds or not preflight.gpus:
        return  # nothing will start here (a plan for a GPU host)
    where = ", ".join(g.label() for g in preflight.gpus)
    if rt.settings.plan_only:
        rt.say(f"[control] --plan-only: no GPU job will start; the scripts for {', '.join(kinds)} are written "
               f"for review (GPUs {where})")
        return
    tp = preflight.gpu_plan.tp if preflight.gpu_plan else len(preflight.gpus)
    rt.say(f"[control] GPU jobs this campaign will start on GPUs {where} (servers with TP {tp}, through "
           f"{rt.settings.executor}):")
    for kind in kinds:
        rt.say(f"[control]   {kind}: {_WHAT[kind]}")
