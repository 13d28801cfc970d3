"""Turns the goal into plan steps with the playbook, and renders plan.md for either planner."""
from __future__ import annotations

import os

from agent.campaign.playbook import plan_goal
from agent.campaign.preflight import Preflight
from agent.report.table import Table, md_text
from agent.settings.model import Settings
from agent.campaign.runtime import Runtime
from agent.steps.base import PlanStep
from tools.measure.accuracy import AccuracyPlan, gate_status, offline_skip_reason


def render_plan_md(goal: str, steps: list[PlanStep], ignored: list[str], preflight: Preflight, planner: str,
                   settings: Settings, will_not: list[str] | tuple[str, ...] = (), run_name: str = "") -> str:
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
    gate = gate_line(steps, settings)
    lines += ["", md_text(gate)] if gate else []
    in_place = configs_line(steps, preflight, run_name)
    lines += ["", "## Kernel configs in place", "", md_text(in_place)] if in_place else []
    if will_not:  # agent/campaign/tuning_caveats.py: said now, not found out on the GPU host
        lines += ["", "## What will not happen", "", *[f"- {md_text(line)}" for line in will_not]]
    if preflight.notes:
        lines += ["", "## Preflight notes", "", *[f"- {md_text(n)}" for n in preflight.notes]]
    return "\n".join(lines) + "\n"


def gate_line(steps: list[PlanStep], settings: Settings) -> str | None:
    """Whether the GSM8K accuracy gate will run (the measure plan decides it the same way,
    agent/steps/measure_plan.py), for plan.md and the console; None without a benchmark step."""
    kinds = {step.kind for step in steps}
    if "benchmark" not in kinds:
        return None
    if "infer_mtp" not in kinds and not settings.accuracy_data:
        return gate_status(None)  # the baseline alone: nothing to gate
    offline = bool(settings.tokenizer or settings.model_path) or os.environ.get("HF_HUB_OFFLINE") == "1"
    skip = offline_skip_reason(settings.accuracy_data, offline)
    return gate_status(AccuracyPlan(questions=settings.accuracy_questions, data_path=settings.accuracy_data,
                                    skip_reason=skip))


def say_gate(rt: Runtime, steps: list[PlanStep], preflight: Preflight) -> None:
    """The accuracy gate and the kernel configs the baseline will read, on the console."""
    for line in (gate_line(steps, rt.settings), configs_line(steps, preflight, rt.run.path.name)):
        if line:
            rt.say(f"[control] {line}")


def configs_line(steps: list[PlanStep], preflight: Preflight, run_name: str) -> str | None:
    """Kernel configs another run installed where this run's servers read them (tools/tuning/in_place.py):
    its baseline is then not SGLang's defaults. None without a benchmark step or such configs."""
    found = preflight.kernel_configs.by_others(run_name) if preflight.kernel_configs else []
    if not found or not any(step.kind == "benchmark" for step in steps):
        return None
    runs = sorted({c.run for c in found})
    listed = "; ".join(f"{c.name} (by {c.run})" for c in found)
    return (f"the baseline will run with {len(found)} kernel config(s) that earlier runs installed into "
            f"{preflight.kernel_configs.config_dir}, not SGLang's defaults: {listed}. For the defaults, first "
            + " and ".join(f"`dsv4-agent tuning uninstall {r}`" for r in runs))


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


def will_not_happen(steps: list[PlanStep], preflight: Preflight) -> list[str]:
    """What preflight found would keep the plan's kernel tuning from running or mattering."""
    return list(preflight.tuning_caveats) if any(step.kind == "tune_kernels" for step in steps) else []


def make_plan(rt: Runtime, goal: str, preflight: Preflight) -> tuple[list[PlanStep], str, list[str]]:
    """The deterministic playbook's plan, its plan.md and what it will not do (the LLM planner is its own
    graph nodes: agent/campaign/llm/planning_nodes.py)."""
    steps, ignored = plan_goal(goal, pull=rt.settings.pull, measure=rt.settings.measure_params())
    will_not = will_not_happen(steps, preflight)
    return steps, render_plan_md(goal, steps, ignored, preflight, "deterministic playbook", rt.settings,
                                 will_not, rt.run.path.name), will_not
