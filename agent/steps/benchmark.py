"""Step ``benchmark``: every variant at every concurrency with SGLang's bench client.

Runs the plan that write_scripts reviewed (``measure_plan.json``; rebuilt the same way when that
step did not run). Without GPUs the step is ``planned``: the scripts are in the run folder and
the summary says how to run them. With GPUs it blocks until the sweep is done; results go to
``bench/<variant>.jsonl``, each point ``--repeats`` times on the same server, then SGLang's GSM8K
check per variant (``bench/accuracy/``). Idempotent: finished points (their line is in the JSONL) are
skipped and jobs re-attach by key (``serve-<variant>``, ``bench-<variant>-c<k>[-r<i>]``,
``gsm8k-<variant>``). Then the verdict (tools/measure/verdict.py) goes to ``verdict.json`` and the
winner's serve script, with the reason as its header, to ``serve_recommended.sh``. Once the last
point is measured, the report's plots are handed to its drawer (agent/report/drawer.py), which draws
them while the last server is stopped.

Executors: local; SSH (server and bench client run on the host, probes and snapshots go through
an ``ssh -L`` forward, each point's JSONL comes back); Slurm (server and bench clients are batch
jobs, probes and snapshots go to the server node's address, the JSONL lands in the shared run
folder). See tools/measure/bench.py and tools/measure/server.py.
"""
from __future__ import annotations

import contextlib
import os
import shlex
from pathlib import Path

from agent.steps.base import PlanStep, StepContext, StepOutcome
from agent.steps.measure_plan import build_plan
from agent.steps.search_step import measure_points
from tools.measure.decision import VERDICT_FILE, decide_folder
from tools.measure.verdict import Slo, Verdict
from tools.scripts import MeasurePlan
from tools.measure.script_render import render_serve_script

RECOMMENDED_SCRIPT = "serve_recommended.sh"


def _plan(ctx: StepContext, step: PlanStep) -> MeasurePlan:
    return ctx.run.measure_plan() or build_plan(ctx, step)[0]


def run(ctx: StepContext, step: PlanStep) -> StepOutcome:
    plan = _plan(ctx, step)
    measure = ctx.run.path / "run_measure.sh"
    if not ctx.may_start_gpu_jobs:
        how = (f"{ctx.why_planned()}: on a GPU host run `SGLANG_PYTHON=/path/to/python bash {shlex.quote(str(measure))}`, "
               f"then `dsv4-agent report {shlex.quote(str(ctx.run.path))}`")
        return StepOutcome(kind="benchmark", status="planned", reason="plan_only" if ctx.has_gpus else "no_gpu",
                           summary=how,
                           data={"command": f"bash {shlex.quote(str(measure))}",
                                 "variants": [v.name for v in plan.variants]})

    def on_event(kind: str, data: dict) -> None:
        if kind == "progress":
            ctx.progress(data.pop("message"), **data)
        else:
            ctx.emit(kind, **data)

    previous_lane, ctx.lane = ctx.lane, "gpu"
    try:
        sweep, total, unmeasured = measure_points(ctx, plan, on_event, lambda: _plots_meanwhile(ctx.run.path))
    finally:
        ctx.lane = previous_lane
    measured = len(sweep.done) + len(sweep.skipped)
    # A missing point leaves the step failed, so that resume measures it and keeps the measured ones.
    status, reason = ("done", "measured") if measured == total else \
        ("failed", "points_failed") if measured else ("failed", "nothing_measured")
    summary = f"{measured}/{total} points measured ({len(sweep.skipped)} from before a restart)"
    if sweep.failures:
        first = sweep.failures[0]
        summary += (f"; {len(sweep.failures)} failed, first: {first.variant} c{first.concurrency}: "
                    f"{first.reason.splitlines()[0]}; `dsv4-agent resume {ctx.run.path}` measures the failed "
                    "points again and keeps the measured ones")
    results = {v: str(p) for v, p in sweep.results.items()}
    verdict = _decide(ctx, plan, unmeasured)
    # Every file the sweep left in bench/ (results, snapshots, failures, accuracy): the report reads them all,
    # and a replay serves exactly these files to it.
    bench = ctx.run.path / "bench"
    artifacts = sorted(str(p.relative_to(ctx.run.path)) for p in bench.rglob("*") if p.is_file())
    if verdict is not None:
        summary += f"; verdict: {_verdict_line(verdict)}"
        artifacts += [VERDICT_FILE] + ([RECOMMENDED_SCRIPT] if verdict.recommended else [])
    return StepOutcome(kind="benchmark", status=status, reason=reason, summary=summary, artifacts=artifacts,
                       data={"results": results, "server_logs": sweep.server_logs,
                             "failures": [f.model_dump() for f in sweep.failures],
                             "done": sweep.done, "skipped": sweep.skipped,
                             "verdict": verdict.model_dump(mode="json") if verdict else None})


def _plots_meanwhile(run_dir: Path) -> None:
    from agent.report.drawer import hand_measured_plots

    with contextlib.suppress(Exception):  # a hand-off that fails only leaves the plots to the report
        hand_measured_plots(run_dir)


def _verdict_line(verdict: Verdict) -> str:
    rec = verdict.recommended
    line = f"deploy {verdict.headline}" if rec not in (None, "baseline") else \
        (f"deploy baseline: {verdict.reason}" if rec else "no recommendation: " + verdict.reason)
    return "; ".join([line, *[f"WARNING: {c}" for c in verdict.callouts]])


def _decide(ctx: StepContext, plan: MeasurePlan, unmeasured: str = "") -> Verdict | None:
    """verdict.json and serve_recommended.sh (the winner's script, the reason as its header comment)."""
    s = ctx.settings
    slo = Slo(max_ttft_ms=s.max_ttft_ms, max_tpot_ms=s.max_tpot_ms, percentile=s.slo_percentile)
    verdict = decide_folder(ctx.run.path / "bench", plan, slo if slo.given else None, s.target_concurrency)
    if verdict is None:
        return None
    verdict.reason += f"; not measured within --budget: {unmeasured}" if unmeasured else ""
    ctx.write_artifact(VERDICT_FILE, verdict.model_dump_json(indent=2))
    stale = ctx.run.path / RECOMMENDED_SCRIPT
    winner = next((v for v in plan.variants if v.name == verdict.recommended), None)
    if winner is None:
        stale.unlink(missing_ok=True)  # a re-run whose verdict changed to "none" leaves no old winner behind
        return verdict
    header = [f"RECOMMENDED by the measurement in {ctx.run.path.name}: {verdict.headline} — {verdict.reason}",
              f"rule: {verdict.rule}",
              *[f"WARNING: {c}" for c in verdict.callouts], *([verdict.accuracy] if verdict.accuracy else [])]
    header += [f"at concurrency {lv.concurrency}: {lv.winner or 'none'}: {lv.why or lv.summary}" for lv in verdict.levels]
    variant = winner.model_copy(update={"rationale": [*header, *winner.rationale]})
    text = render_serve_script(variant, s.sglang_python, plan.port)
    os.chmod(ctx.write_artifact(RECOMMENDED_SCRIPT, text), 0o755)
    return verdict
