"""The benchmark step's measurement under ``--budget``: the fenced space written into plan.md for review
(by write_scripts, before any server starts), then the search (tools/measure/search.py) in place of the
full sweep. Without a budget the step runs the full sweep, every variant at every repeat."""
from __future__ import annotations

from typing import Callable

from agent.steps.base import StepContext
from agent.steps.infer_mtp import mtp_settings_of
from tools.measure.bench import SweepResult, run_sweep
from tools.measure.search import run_search
from tools.measure.search_budget import budget_seconds, duration_text
from tools.scripts import MeasurePlan

PLAN_MD = "plan.md"


def write_space(ctx: StepContext) -> None:
    """plan.md gets the fenced space: every setting the search may measure, why it is allowed, the fences."""
    judged = mtp_settings_of(ctx.outcomes)
    if ctx.settings.budget is None or judged is None or judged.space is None:
        return
    path = ctx.run.path / PLAN_MD
    text = path.read_text() if path.exists() else ""
    head = "## Search space (--budget)"
    if head in text:
        return  # written by an earlier attempt: the same space
    budget = duration_text(budget_seconds(ctx.settings.budget) or 0.0)
    lines = ["", head, "", f"Successive halving within {budget} of GPU time: every setting below gets a first look "
             "(one repeat per concurrency); those measurably worse than the best at every level are dropped; the "
             f"survivors get all {ctx.settings.repeats} repeats while the budget lasts.", "",
             "- `baseline`: SGLang defaults, the reference every ratio is against", *judged.space.lines()]
    ctx.write_artifact(PLAN_MD, text.rstrip("\n") + "\n" + "\n".join(lines) + "\n")


def measure_points(ctx: StepContext, plan: MeasurePlan, on_event: Callable[[str, dict], None],
            on_measured: Callable[[], None]) -> tuple[SweepResult, int, str]:
    """(what was measured, how many points were to be measured, what the budget left out: '' for nothing)."""
    budget = budget_seconds(ctx.settings.budget)
    if budget is None:
        sweep = run_sweep(ctx.executor, plan, ctx.settings.sglang_python, ctx.run.path / "bench", on_event=on_event,
                          on_measured=on_measured)
        return sweep, len(plan.variants) * len(plan.points()), ""
    sweep, state = run_search(ctx.executor, plan, ctx.settings.sglang_python, ctx.run.path / "bench", budget,
                              on_event=on_event)
    sweep.skipped = sorted(set(sweep.skipped) - set(sweep.done))  # a survivor's first look, seen again by its repeats
    looks = len(plan.variants) - len(state.no_look)
    total = looks * len(plan.concurrency) + len(state.extra) * len(plan.concurrency) * (plan.repeats - 1)
    return sweep, total, state.unmeasured_text()
