"""Start and resume campaigns: run folder, lock, trace, executor, graph, result.json.

``result.json`` is written last, once, by ``_finish``; its status comes from a closed set (see
``agent.exit_codes.RUN_STATUSES``), each produced by one path here or in the graph's report node.
"""
from __future__ import annotations

import os
import shutil
import sys
import traceback

from agent.exit_codes import ExitCode, exit_code_of
from agent.secrets import redact_text
from agent.campaign.llm.budget import BudgetExhausted
from agent.campaign.checkpoints import CheckpointError, checkpoint_to_rebuild, set_checkpoint_aside
from agent.settings.model import Settings
from agent.campaign.early_lane import start_early
from agent.run.disk import (DISK_FULL, MIN_FREE_BYTES, free_bytes, is_disk_full, keep_reserve, no_space,
                        release_reserve, too_full)
from agent.campaign.handoff_review import after_review, review_gate, review_view
from agent.campaign.hub_check import unreachable_model
from agent.campaign.interrupts import Interrupted, SignalWatch, invoke_responsively
from agent.terminal.live import LiveView
from agent.run.folder import RunFolder, RunFolderError
from agent.run.run_files import CONFIG, RESULT
from agent.campaign.record_source import LiveSource
from agent.settings.recorded import CampaignError, missing_host_path, vouch_for_run
from agent.campaign.reopen import (changed_settings, complete_finish, gpus_now_differ, locked_run, planned_target_here,
                          resume_settings, say_how_it_resumes)
from agent.run.status import verdict_line
from agent.campaign.runtime import Runtime
from agent.campaign.servers_left import end_servers
from agent.steps.step_table import redone_by
from agent.run.trace import TraceWriter
from tools.base import ToolError
from tools.jobs import attempts as attempts_lib
from tools.stop import wait_for_side_effects

INSTALL_WAIT_S = 60.0  # an install in progress when Ctrl-C came is let finish (it takes seconds)
JOBS_WAIT_S = 15.0  # listing the jobs (over SSH, say) for the summary


def _open_runtime(run: RunFolder, settings: Settings, goal: str, view: LiveView,
                  resumed_with: dict | None = None) -> Runtime:
    """The run's runtime; ``resumed_with`` (a resume's options) lets a run planned for a target's GPU count
    use the GPUs found now (agent/campaign/reopen.py). ``--mtp-steps`` is judged here, on the GPUs just checked."""
    from agent.campaign.preflight import check_gpus
    from agent.steps.infer_mtp import up_front
    from tools.gpu_choice import GpuRequestError
    from tools.jobs.factory import make_executor
    from tools.jobs.outages import OutageWait

    view.run_path = run.path
    trace = TraceWriter(run.trace_path)
    trace.listeners.append(view.on_event)
    try:
        executor = make_executor(settings.executor, run.jobs_dir, ssh_options=settings.ssh_options,
                                 nvidia_smi=settings.nvidia_smi,
                                 outage=OutageWait(settings.outage_wait_s, notify=view.say))
        if resumed_with is not None:
            settings = planned_target_here(settings, executor, resumed_with)
        checked = check_gpus(settings, executor)  # a request that cannot be met is a usage error, before any step
        if offline := unreachable_model(settings, checked, goal):  # else every bench point fails after retries
            raise ToolError(offline)
        mtp = up_front(settings, checked) if settings.mtp_steps and resumed_with is None else None  # judged once
    except (ToolError, GpuRequestError) as err:  # e.g. an executor that cannot re-attach to the run's jobs
        trace.close()
        run.unlock()
        raise CampaignError(str(err)) from None
    # The goal is data that travels into the plan's words and the graph's checkpoint.sqlite: redacted here,
    # as config.json and the trace record it, so a URL password in it is written nowhere.
    return Runtime(settings=settings, run=run, trace=trace, executor=executor, goal=redact_text(goal), say=view.say,
                   view=view, source=LiveSource(gpus_checked=checked), mtp_settings=mtp)


def _drive(rt: Runtime, thread_id: str, fresh: bool, watch: SignalWatch | None = None, hard_exit: bool = True) -> int:
    """Run the graph to its end and record the result; ``hard_exit=False`` returns after an interrupt
    instead of ending the process (replay re-creates recorded interrupts through ``watch``)."""
    with watch or SignalWatch() as watch:  # a signal from here on ends the run as `interrupted`
        conn = None
        try:
            if fresh and (early := start_early(rt)) is not None:
                early.wait_for_first_job()  # LangGraph's imports would slow the lane's way to its first job
            from agent.campaign.checkpoints import (checkpoint_words, close_when_ended, follow_the_trace, forget_pending_writes,
                                           open_checkpoints)
            from agent.campaign.graph import build_graph, recursion_limit

            conn, saver = open_checkpoints(rt.run.checkpoint_path, *checkpoint_words(rt))
            if not fresh and rt.trace_checkpoints:
                follow_the_trace(conn, rt.trace.path, thread_id)
            if fresh:  # from nothing: a thread a resume on other GPUs starts afresh keeps no state of its own
                saver.delete_thread(thread_id)
            graph = build_graph(rt, saver)
            config = {"configurable": {"thread_id": thread_id}, "recursion_limit": recursion_limit(rt.settings)}
            state = graph.get_state(config)
            if not fresh and state.config["configurable"].get("checkpoint_id"):
                # A kill lands before or after LangGraph saves a finished lane's writes (its node_finished
                # is traced either way), and no replay could tell which: every lane of the superstep that
                # did not commit runs again, re-attaching to its jobs and reusing its steps. Forgotten before
                # the state is read, which they change (with every lane's writes saved, nothing is "next").
                forget_pending_writes(conn, state.config)
                state = graph.get_state(config)
            resume_from_checkpoint = not fresh and bool(state.next)
            final = invoke_responsively(graph, None if resume_from_checkpoint else {"goal": rt.goal}, config, watch)
            status = final.get("status", "failed")
            return _finish(rt, status, _summary(rt, final))
        except Interrupted as why:
            return _stop(rt, watch, str(why), hard_exit)
        except BudgetExhausted as why:
            return _finish(rt, "budget_exhausted", str(why))
        except Exception as err:  # anything unexpected ends the run with a recorded status
            if is_disk_full(err):
                return _disk_full(rt)
            rt.trace.emit("error", "control", error=type(err).__name__, message=str(err),
                          traceback=traceback.format_exc(limit=8))
            return _finish(rt, "failed", f"{type(err).__name__}: {err}")
        finally:
            rt.early_preflight = rt.early_gpu_lane = None  # this attempt's: the next one decides its own
            if conn is not None:
                close_when_ended(watch.worker, conn)


def _stop(rt: Runtime, watch: SignalWatch, why: str, hard_exit: bool) -> int:
    """Record ``interrupted`` and end the process (exit 130); a second signal skips the waiting."""
    watch.unless_stop_now(lambda: wait_for_side_effects(INSTALL_WAIT_S), False, INSTALL_WAIT_S)
    running = watch.unless_stop_now(lambda: rt.source.running_jobs(rt.executor), None, JOBS_WAIT_S)
    note = f"; jobs still running: {', '.join(running)} (`dsv4-agent jobs {rt.run.path} --stop all` stops them)" if running else (
        "; the jobs were not listed (stopped at once): `dsv4-agent jobs RUN` lists them" if running is None else "")
    code = _finish(rt, "interrupted", f"interrupted by {why}{note}; `dsv4-agent resume {rt.run.path}` continues",
                   signal=why, signal_at=watch.first_at, jobs_running=running)
    if not hard_exit:
        return code
    if rt.view is not None:
        rt.view.__exit__(None, None, None)  # restore the terminal before the hard exit
    sys.stdout.flush()
    os._exit(code)  # lane threads may be blocked on jobs; the jobs are detached and resumable


def _summary(rt: Runtime, final: dict) -> str:
    return "; ".join(f"{k}: {v['status']}" for k, v in final.get("outcomes", {}).items()) or "no steps ran"


def _disk_full(rt: Runtime) -> int:
    """End the attempt ``failed`` (reason ``disk_full``) in the room its reserve leaves (agent/run/disk.py)."""
    release_reserve(rt.run.path)
    summary = f"{no_space(rt.run.path)}, then `dsv4-agent resume {rt.run.path}`"  # no figure: a replay says it too
    disk = {"free_bytes": free_bytes(rt.run.path), "needed_bytes": MIN_FREE_BYTES}
    try:
        return _finish(rt, "failed", summary, result_extra={"reason": DISK_FULL, "disk": disk}, reason=DISK_FULL,
                       traceback=traceback.format_exc(limit=8))
    except Exception as err:
        if not is_disk_full(err):
            raise
        rt.say(f"[control] run failed: {summary} (the disk is too full even for result.json)")
        return ExitCode.FAILED


def _finish(rt: Runtime, status: str, summary: str, result_extra: dict | None = None, **event_fields) -> int:
    status, summary, result_extra = end_servers(rt, status, summary, result_extra, event_fields)  # none outlives it
    extra = {**rt.run.result_fields(status, rt.settings.plan_only), **(result_extra or {})}
    rt.trace.emit("run_finished", "control", status=status, summary=summary, **event_fields)
    try:
        rt.run.write_result(status, summary, **extra)
    except OSError as err:  # the disk filled up after run_finished: the reserve makes room for the result
        if not is_disk_full(err):
            raise
        release_reserve(rt.run.path)
        rt.run.write_result(status, summary, **extra)
    if rt.view is not None:
        rt.view.finish()  # the live view's last screen stays above the lines that end the run
    rt.say(f"[control] run {status}: {summary}")
    if "next" in extra:
        rt.say(f"[control] next step: {extra['next']}")
    rt.say(f"[control] run folder: {rt.run.path}")
    if "verdict" in extra:  # the verdict and the report's path are the last lines a reader sees (`status` too)
        rt.say(f"[control] verdict: {verdict_line(extra['verdict'])}")
    if "report" in extra:
        rt.say(f"[control] report: {extra['report']}")
    return exit_code_of(status)


def start(settings: Settings, goal: str, view: LiveView | None = None) -> int:
    view = view or LiveView(force_plain=True)
    try:
        run = RunFolder.create(settings.runs_dir, goal)
    except RunFolderError as err:
        raise CampaignError(str(err)) from None
    settings.remember_secrets()
    run.lock()
    if full := too_full(run.path):
        shutil.rmtree(run.path)  # made a moment ago by this call
        raise CampaignError(f"cannot start a run: {full}")
    keep_reserve(run.path)
    config_file = settings.config_file.record() if settings.config_file else None
    run.write_json(CONFIG, {"goal": goal, "settings": settings.public_dump(), "config_file": config_file})
    vouch_for_run(run.path)  # this user's own settings: a resume may take them back (agent/settings/of_run.py)
    try:
        rt = _open_runtime(run, settings, goal, view)
    except CampaignError:
        shutil.rmtree(run.path)  # made a moment ago by this call: leave no half-made run behind
        raise
    rt.trace.emit("run_started", "control", goal=goal, run=run.path.name, argv=sys.argv[1:], config_file=config_file,
                  checkpoints_traced=True)
    print(f"dsv4-agent: {settings.config_note()}", file=sys.stderr, flush=True)  # what was read, on every run
    rt.say(f"[control] run folder: {run.path}")
    return _drive_and_let_go(rt, "attempt-1", True, view)


def resume(ref: str, runs_dir: str, overrides: dict, view: LiveView | None = None, retry_failed: bool = False,
           rebuild_checkpoint: bool = False, accept_changes: bool = False) -> int:
    view = view or LiveView(force_plain=True)
    run, result, events = locked_run(ref, runs_dir)
    if full := too_full(run.path):
        run.unlock()
        raise CampaignError(f"cannot resume {run.path.name}: {full}")
    keep_reserve(run.path)
    started = bool(events)
    recorded = run.config()
    if result is None and events and events[-1]["type"] == "run_finished":
        result = complete_finish(run, events[-1], recorded)  # killed between the event and result.json
    try:
        damaged = checkpoint_to_rebuild(run, events, rebuild_checkpoint)
    except CheckpointError as err:
        run.unlock()
        raise CampaignError(str(err)) from None
    settings = resume_settings(run, overrides)
    missing = missing_host_path(settings, overrides) or review_gate(run, settings, accept_changes)
    if missing:
        run.unlock()
        raise CampaignError(missing)
    rt = _open_runtime(run, settings, recorded["goal"], view, overrides)  # refuses a bad executor before any change
    settings = rt.settings
    regpu = gpus_now_differ(run, rt.source.gpus_checked)
    if damaged:
        set_checkpoint_aside(run)
    if not started:  # the agent died after config.json, before its first event: the run starts over
        return _start_over(rt, recorded["goal"], view)
    attempts = sorted(run.path.glob("result.attempt-*.json"))
    run.keep_preflight(attempt=1 + sum(e["type"] == "run_resumed" for e in events))
    if result is not None:  # a planned/failed/interrupted run: a new attempt, reusing done steps
        os.replace(run.path / RESULT, run.path / f"result.attempt-{len(attempts) + 1}.json")
    thread = f"attempt-{len(attempts) + 1 + (result is not None)}"
    jobs_elsewhere = settings.executor.kind == "ssh"
    if held := result is not None and not accept_changes and bool(redone_by(changed_settings(settings, recorded), jobs_elsewhere)):
        settings = rt.settings = settings.model_copy(update={"plan_only": True})  # no GPU job before a review
    changed = changed_settings(settings, recorded)
    if changed:  # config.json holds the settings in force (e.g. `jobs RUN` must find a new executor)
        history = [*recorded.get("resumed_with", []), {"attempt": thread, "changed": changed}]
        run.write_json(CONFIG, {**recorded, "settings": settings.public_dump(), "resumed_with": history})
        vouch_for_run(run.path)  # settings this user gave or took back (agent/settings/of_run.py)
    retried = attempts_lib.retry_failed(rt.executor) if retry_failed else []
    # A new attempt on another host (a bundle, another --sglang): what its finished steps made from the
    # old host's paths (the MTP evidence, the scripts) is made again from this host's.
    reviewed = review_view(run) if held else None
    redone = run.forget_outcomes(redone_by(changed, jobs_elsewhere)) if result is not None else []
    dropped = rt.trace.dropped
    rt.trace.emit("run_resumed", "control", run=run.path.name, thread=thread, after=(result or {}).get("status"),
                  checkpoints_traced=True,
                  rebuilt_checkpoint=damaged, gpus_changed=regpu, changed={k: settings.public_dump()[k] for k in changed},
                  previous={k: recorded["settings"].get(k) for k in changed}, retry_granted=retried,
                  **({"redone": redone} if redone else {}),
                  dropped_tail={"bytes": dropped.size, "lines": dropped.lines, "why": dropped.why} if dropped else None,
                  seq_gaps=[g.describe() for g in rt.trace.gaps])
    say_how_it_resumes(rt, changed, redone, damaged, regpu)
    code = _drive_and_let_go(rt, thread, result is not None or bool(damaged or regpu), view)
    return code if reviewed is None else after_review(rt, reviewed, code, bool(overrides.get("plan_only")), lambda: resume(
        str(run.path), runs_dir, overrides, view, accept_changes=True))


def _drive_and_let_go(rt: Runtime, thread_id: str, fresh: bool, view: LiveView) -> int:
    """Drive the run, then let go of its lock and trace once ``result.json`` is written. The console
    script ends right after; a caller that goes on (a test running the CLI in its own process) would
    otherwise keep the run locked against the ``resume`` that follows."""
    try:
        with view:
            return _drive(rt, thread_id, fresh)
    finally:
        release_reserve(rt.run.path)
        rt.trace.close()
        rt.run.unlock()


def _start_over(rt: Runtime, goal: str, view: LiveView) -> int:
    rt.trace.emit("run_started", "control", goal=goal, run=rt.run.path.name, argv=sys.argv[1:],
                  started_over="the previous agent died before writing its first trace event", checkpoints_traced=True)
    rt.say(f"[control] resuming {rt.run.path}: nothing was recorded yet, so the run starts from the beginning")
    return _drive_and_let_go(rt, "attempt-1", True, view)


def load_run(ref: str, runs_dir: str) -> RunFolder:
    try:
        return RunFolder.find(ref, runs_dir)
    except RunFolderError as err:
        raise CampaignError(str(err)) from None


__all__ = ["start", "resume", "load_run", "CampaignError", "Interrupted"]
