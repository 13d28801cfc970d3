"""Campaign step ``sync`` (``--pull``): adapt tools.sync to the run folder and the trace.

Idempotent: the HEAD before pulling is recorded in ``sync.start.json`` before anything moves,
so a re-run after a crash that already fast-forwarded still reports the same commits (from that
HEAD) instead of "up to date". A refusal (dirty, diverged, no upstream, fetch failure) is a
``failed`` outcome with the message; the campaign goes on with the checkout as it was.
"""
from __future__ import annotations

import json
from pathlib import Path

from agent.run.run_files import MTP_ANSWER
from agent.steps.base import PlanStep, StepContext, StepOutcome
from agent.steps.infer_mtp import mtp_inputs, settings_record
from tools.base import ToolError
from tools.sync.markdown import render_markdown
from tools.sync.repo import open_checkout
from tools.sync.upstream import SyncArgs, sync_upstream

START_FILE = "sync.start.json"


def previous_answer(run_path: Path) -> Path | None:
    """``mtp.json`` of the latest earlier run (run folder names sort by their UTC time)."""
    earlier = sorted(p for p in run_path.parent.iterdir() if p.is_dir() and p.name < run_path.name)
    for folder in reversed(earlier):
        if (folder / MTP_ANSWER).is_file():  # read by the sync tool, which takes a path as the user gives one
            return folder / MTP_ANSWER
    return None


def _failed(ctx: StepContext, message: str) -> StepOutcome:
    summary = f"sync refused: {message} The campaign continues on the unchanged checkout."
    ctx.write_artifact("sync.json", json.dumps({"status": "refused", "message": message}, indent=2) + "\n")
    ctx.write_artifact("sync.md", f"# Sync refused\n\n{message}\n\nThe campaign continued on the unchanged checkout.\n")
    return StepOutcome(kind="sync", status="failed", reason="sync_refused", summary=summary,
                       artifacts=["sync.json", "sync.md"])


def run(ctx: StepContext, step: PlanStep) -> StepOutcome:
    settings = ctx.settings
    if not settings.sglang_src:
        return _failed(ctx, "--pull needs an SGLang git checkout: pass --sglang PATH (setting sglang_src).")
    try:
        started = ctx.run.json_object(START_FILE)
        if started is not None:
            report_from = started["head"]
        else:
            with open_checkout(settings.sglang_src) as checkout:
                report_from = checkout.head.commit.hexsha
            ctx.run.write_json(START_FILE, {"head": report_from})
        previous = previous_answer(ctx.run.path)
        ctx.progress(f"sync: fetching {settings.remote}/{settings.branch} into {settings.sglang_src}",
                     previous_answer=str(previous) if previous else None)
        result = sync_upstream(SyncArgs(
            sglang=settings.sglang_src, remote=settings.remote, branch=settings.branch,
            allow_dirty=settings.allow_dirty, model=settings.model, model_path=settings.model_path,
            config=ctx.checkpoint_config,
            gpu=ctx.gpus[0].name if ctx.gpus else None, gpus=len(ctx.gpus) or None,
            sglang_python=settings.sglang_python, previous_answer=str(previous) if previous else None,
            report_from=report_from, mtp=mtp_inputs(settings, ctx.sglang_root, ctx.gpus,
                                                    ctx.gpu_plan.tp if ctx.gpu_plan else None,
                                                    checkpoint=ctx.checkpoint, architecture=ctx.architecture)))
    except ToolError as err:
        return _failed(ctx, str(err))

    ctx.write_artifact("sync.json", result.model_dump_json(indent=2) + "\n")
    ctx.write_artifact("sync.md", render_markdown(result))
    deps = result.dependencies
    if deps.reinstall:
        ctx.progress(f"sync: dependency pins moved; run in the SGLang environment: {deps.reinstall}")
    return StepOutcome(kind="sync", status="done", reason="synced", summary=result.summary, artifacts=["sync.json", "sync.md"],
                       data={"status": result.pull.status, "old_head": result.reported_from,
                             "new_head": result.pull.new_head, "commits": len(result.pull.commits),
                             "reinstall": deps.reinstall, "impact": len(result.impact),
                             "recommendation": result.recommendation.status,
                             # the infer_mtp step takes these when it judges the same inputs (not judged twice)
                             "mtp_after": settings_record(result.evidence_after.settings)})
