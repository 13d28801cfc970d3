"""The deterministic planner: goal words → campaign steps. Used whenever no LLM is configured.

Words are matched to capabilities; filler words are ignored; a goal naming no capability is
refused with the list of what the playbook can do.
"""
from __future__ import annotations

import re

from agent.steps.base import PlanStep
from agent.steps.step_table import plan_step

# capability → the words that ask for it (lower case, matched as whole words or prefixes)
CAPABILITIES: dict[str, tuple[str, ...]] = {
    "tune": ("tune", "tuning", "tuned", "kernel", "kernels", "gemm", "fp8", "autotune", "triton"),
    "mtp": ("mtp", "eagle", "speculative", "spec", "nextn", "draft", "decoding"),
    "measure": ("benchmark", "benchmarks", "bench", "measure", "compare", "ttft", "tpot", "itl",
                "throughput", "latency", "accept", "sweep", "baseline", "report"),
    "sync": ("sync", "pull", "upstream", "update", "fetch"),
}
FILLER_WORDS = """a an and the then also to for of on in with my our please run enable enabling turn
use it its all both do make get set up from by into this that try see what how"""
FILLER = frozenset(FILLER_WORDS.split())

WHAT_IT_CAN_DO = (
    "the playbook understands: tune kernels (FP8 block-GEMM Triton tuning), enable MTP / EAGLE "
    "speculative decoding, benchmark / compare / measure (TTFT, TPOT, throughput, accept length), "
    "sync / pull upstream. Example: dsv4-agent \"enable MTP and tune kernels\". "
    "For other goals configure an LLM (--llm-base-url)."
)


class GoalError(Exception):
    """The goal names nothing the playbook can do."""


def words_of(goal: str) -> list[str]:
    return re.findall(r"[a-z0-9][a-z0-9+.-]*", goal.lower())


def understand(goal: str) -> tuple[set[str], list[str]]:
    """The capabilities a goal asks for, and the words that matched nothing."""
    asked: set[str] = set()
    unknown: list[str] = []
    for word in words_of(goal):
        hits = {cap for cap, keys in CAPABILITIES.items() if word in keys}
        if hits:
            asked |= hits
        elif word not in FILLER:
            unknown.append(word)
    return asked, unknown


def plan_goal(goal: str, pull: bool = False, measure: dict | None = None) -> tuple[list[PlanStep], list[str]]:
    """Steps for the goal, in campaign order, and the words the playbook ignored."""
    asked, unknown = understand(goal)
    if pull:
        asked.add("sync")
    if not asked - {"sync"} and "sync" not in asked:
        shown = ", ".join(repr(w) for w in unknown) or "nothing"
        raise GoalError(f"the goal {goal!r} names no capability (did not understand {shown}); {WHAT_IT_CAN_DO}")
    steps: list[PlanStep] = []
    if "sync" in asked:
        steps.append(plan_step("sync", "asked to sync/pull upstream" if not pull else "--pull given"))
    if "tune" in asked:
        steps.append(plan_step("tune_kernels", "goal asks to tune kernels"))
    if "mtp" in asked:
        steps.append(plan_step("infer_mtp", "goal asks for MTP / speculative decoding"))
    if asked & {"mtp", "measure"}:
        steps.append(plan_step("write_scripts", "serve and measurement scripts for review before anything runs",
                               measure))
        steps.append(plan_step("benchmark", "measure baseline vs variants at each concurrency"))
    return steps, unknown
