"""Turns the goal into plan steps with the playbook, and renders plan.md for either planner."""
from __future__ import annotations

from agent.campaign.playbook import plan_goal
from agent.campaign.preflight import Preflight
from agent.report.table import Table, md_text
from agent.settings.model import Settings
from agent.campaign.runtime import Runtime
from agent.steps.base import PlanStep


def render_plan_md(goal: str, steps: list[PlanStep], ignored: list[str], preflight: Preflight, planner: str,
                   settings: Settings) -> str:
    """plan.md; the goal and an LLM planner's reasons are data, so every cell and line is escaped."""
    has_gpu = bool(preflight.gpus)
    lines = [f"# Plan: {md_text(goal)}", "", f"Planner: {planner}.", ""]
    if ignored:
        lines += [md_text(f"Words the planner did not use: {', '.join(ignored)}."), ""]
    table = Table(["#", "step", "lane", "will", "why"])
    for i, step in enumerate(steps, 1):
        will = "planned (no GPU here): scripts written, not run" if step.lane == "gpu" and not has_gpu else "run"
        table.add(i, step.kind, step.lane, will, step.why)
    lines.append(table.markdown())
    lines += _server_additions(settings)
    if preflight.notes:
        lines += ["", "## Preflight notes", "", *[f"- {md_text(n)}" for n in preflight.notes]]
    return "\n".join(lines) + "\n"


def _server_additions(settings: Settings) -> list[str]:
    """What ``--server-arg``/``--server-env`` add to every serve script, for the reviewer."""
    if not settings.server_args and not settings.server_env:
        return []
    table = Table(["added to every server", "from"])
    for entry in settings.server_args:
        table.add(entry, "--server-arg")
    for entry in settings.server_env:
        table.add(entry, "--server-env")
    return ["", table.markdown()]


def make_plan(rt: Runtime, goal: str, preflight: Preflight) -> tuple[list[PlanStep], str]:
    """The deterministic playbook's plan (the LLM planner is its own graph nodes: agent/campaign/llm/planning_nodes.py)."""
    steps, ignored = plan_goal(goal, pull=rt.settings.pull, measure=rt.settings.measure_params())
    return steps, render_plan_md(goal, steps, ignored, preflight, "deterministic playbook", rt.settings)
