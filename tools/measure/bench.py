"""Benchmark sweep with SGLang's own client (``python -m sglang.bench_serving``), never our own
load generator.

Per variant a fresh server, then one bench job per concurrency level appending to
``<results_dir>/<variant>.jsonl``; a point already in that file is not run again, and a failed
one goes to ``<variant>.failures.jsonl`` while the sweep goes on. One server at a time: any other
server job of the run still running is stopped before a variant begins and when the sweep ends,
and nothing starts beside one that could not be stopped. SGLang's accept length is cumulative
since server start, so each point is bracketed by server snapshots (tools/measure/accept_snapshots.py).

On another host (SSH) the JSONL is copied there before each point and fetched back after it; the
snapshots are taken here through the port forward. Under Slurm the run folder is shared, so the
client appends in place and the snapshots are taken at the server node's address.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from tools.measure.accept_snapshots import pending_befores, snapshot_file, take_snapshot
from tools.measure.accuracy import result_file, run_accuracy
from tools.base import ToolError, cap_text
from tools.jobs import Executor, JobSpec, JobState
from tools.measure.results import parse_jsonl
from tools.scripts.models import BenchPoint, MeasurePlan, ServeVariant, point_args
from tools.measure.identity import point_identity, point_job, server_job
from tools.measure.server import ServerHandle, running_server, stop_leftover_servers, stop_server
from tools.measure.sweep_server import start_server
from tools.jobs.attempts import next_attempt
from tools.jobs.exit_wait import exit_stamp, sleep_until_an_exit

EventSink = Callable[[str, dict], None]  # (trace event type, data)
BASELINE = "baseline"  # the variant every ratio is against, measured first


class PointFailure(BaseModel):
    variant: str
    concurrency: int
    reason: str
    log: str = ""


class SweepResult(BaseModel):
    results: dict[str, str] = Field(default_factory=dict, description="variant -> JSONL path")
    server_logs: dict[str, str] = Field(default_factory=dict, description="variant -> server log path")
    done: list[str] = Field(default_factory=list, description="Points measured, as <variant>-c<k>")
    skipped: list[str] = Field(default_factory=list, description="Points already in the JSONL")
    failures: list[PointFailure] = Field(default_factory=list)


def finished_points(results_file: Path, variant: str) -> set[str]:
    """Tags of the points (concurrency and repeat) that already have a result line for this variant."""
    if not results_file.exists():
        return set()
    return {r.tag if r.tag else BenchPoint(concurrency=r.concurrency, num_prompts=1).tag(variant)
            for r in parse_jsonl(results_file, variant).records if r.concurrency is not None}


def _record_failure(results_dir: Path, failure: PointFailure) -> None:
    with open(results_dir / f"{failure.variant}.failures.jsonl", "a") as f:
        f.write(json.dumps(failure.model_dump()) + "\n")


def _wait(executor: Executor, key: str, poll_s: float = 0.3) -> JobState:
    while True:
        seen = {key: exit_stamp(executor, key)}
        state = executor.poll(key)
        if state.done:
            return state
        sleep_until_an_exit(executor, seen, poll_s)


def _fail_points(results_dir: Path, variant: ServeVariant, todo: list[BenchPoint], reason: str, log: str,
                 out: SweepResult) -> None:
    for point in todo:
        failure = PointFailure(variant=variant.name, concurrency=point.concurrency, reason=reason, log=log)
        _record_failure(results_dir, failure)
        out.failures.append(failure)


def _point_done(executor: Executor, results_file: Path, variant: str, point: BenchPoint) -> bool:
    """The point's result line is in the JSONL (fetched first from the host of a remote executor)."""
    executor.fetch_run_file(results_file)  # a shared or local run folder already has it
    return point.tag(variant) in finished_points(results_file, variant)


def run_point(executor: Executor, plan: MeasurePlan, variant: ServeVariant, point: BenchPoint,
              python: str, server: ServerHandle, results_file: Path, env: dict[str, str],
              timeout_s: float | None, emit: EventSink | None = None) -> tuple[str, PointFailure | None]:
    """Measure one point (a new attempt, or the running one re-attached): (job key, failure or None)."""
    emit = emit or (lambda _type, _data: None)
    tag = point.tag(variant.name)
    attempt = next_attempt(executor, point_job(variant.name, point), point_identity(plan, variant, point),
                           is_done=lambda _state: _point_done(executor, results_file, variant.name, point))
    if attempt.verdict == "give_up":
        return attempt.key, PointFailure(variant=variant.name, concurrency=point.concurrency, reason=attempt.reason,
                                         log=str(executor.job_dir(attempt.key) / "log.txt"))
    if attempt.verdict == "succeeded":  # it ended while the agent was away; its line is in the JSONL
        _after_snapshot(python, executor, server, tag, results_file)
        return attempt.key, None
    if attempt.number > 1 or attempt.verdict == "attach":
        emit("progress", {"message": f"{tag}: attempt {attempt.number}"
                                     + (f" ({attempt.reason})" if attempt.reason else " re-attached"),
                          "key": attempt.key, "attempt": attempt.number, "kind": "bench", "variant": variant.name,
                          **({"retry_of": attempt.retry_of.key} if attempt.retry_of else {})})
    key = attempt.key
    snapshots = snapshot_file(results_file.parent, variant.name)
    if attempt.verdict == "launch" or tag not in pending_befores(snapshots):
        # A re-attached bench job keeps the 'before' taken when it was first launched.
        take_snapshot(_snapshot_python(executor, python), server.url, tag, "before", snapshots)
    # absolute: the agent may be resumed from another folder (and SSH maps it, Slurm jobs start elsewhere)
    argv = [python, *point_args(plan, variant.name, point, server.host, server.port, str(results_file.resolve()))]
    launched = executor.launch(JobSpec(key=key, argv=argv, kind="bench", lane="gpu", env=env, gpus=[],
                                       timeout_s=timeout_s, grace_s=5.0, identity=point_identity(plan, variant, point)))
    # The client uses no GPU (gpus []); the timeline draws it on its own lane, the live view under its variant.
    emit("job_launched", {"key": key, "kind": "bench", "variant": variant.name, "concurrency": point.concurrency,
                          "repeat": point.repeat, "gpus": [], "attached": launched.attached, "attempt": attempt.number})
    state = _wait(executor, key)
    done = _point_done(executor, results_file, variant.name, point)  # the host's copy: ours plus this line
    if state.status == "succeeded":
        take_snapshot(_snapshot_python(executor, python), server.url, tag, "after", snapshots)
    tail = cap_text(executor.read_log(key, 4000), 2000).text
    if state.status != "succeeded":
        return key, PointFailure(variant=variant.name, concurrency=point.concurrency, log=state.log_path,
                                 reason=f"bench client {state.status}: {state.reason}; log tail:\n{tail}")
    if not done:
        return key, PointFailure(variant=variant.name, concurrency=point.concurrency, log=state.log_path,
                                 reason=f"bench client wrote no result line (all metrics empty?); log tail:\n{tail}")
    return key, None


def _snapshot_python(executor: Executor, python: str) -> str:
    remote = executor.capabilities.remote_host  # the client writes on the executor's host
    cluster = executor.capabilities.servers_on_nodes  # Slurm: the client is a job on some node, same run folder
    return sys.executable if remote or cluster else python  # the SGLang python may exist only there


def _after_snapshot(python: str, executor: Executor, server: ServerHandle, tag: str, results_file: Path) -> None:
    """The 'after' of a point that ended while the agent was away, when the server it ran on still runs."""
    snapshots = snapshot_file(results_file.parent, server.variant)
    if server.attached and tag in pending_befores(snapshots):
        take_snapshot(_snapshot_python(executor, python), server.url, tag, "after", snapshots)


def run_sweep(executor: Executor, plan: MeasurePlan, python: str, results_dir: Path,
              env: dict[str, str] | None = None, on_event: EventSink | None = None,
              ready_timeout_s: float | None = None, point_timeout_s: float | None = 3600.0,
              on_measured: Callable[[], None] | None = None) -> SweepResult:
    """Blocking: every variant, every point; returns what was measured and what failed. ``on_measured`` is
    called once the last variant's points are measured, before its accuracy check and its server's stop."""
    emit = on_event or (lambda _type, _data: None)
    results_dir.mkdir(parents=True, exist_ok=True)
    bench_env = dict(env or {})
    if plan.tokenizer:
        bench_env.setdefault("HF_HUB_OFFLINE", "1")  # a local tokenizer: never wait on the hub
    out = SweepResult()
    later = {v.name: _server_need(executor, plan, v, results_dir) for v in plan.variants}
    for variant in sorted(plan.variants, key=lambda v: v.name != BASELINE):  # the reference first
        results_file = results_dir / f"{variant.name}.jsonl"
        out.results[variant.name] = str(results_file)
        finished = finished_points(results_file, variant.name)
        todo = [p for p in plan.points() if p.tag(variant.name) not in finished]
        out.skipped += [p.tag(variant.name) for p in plan.points() if p.tag(variant.name) in finished]
        if variant.name != BASELINE and todo and _without_baseline(plan, results_dir, variant, todo, emit, out):
            todo = [p for p in todo if p.concurrency in _baseline_levels(plan, results_dir)]
            if not todo:
                del later[variant.name]
                continue
        check_accuracy = plan.accuracy is not None and plan.accuracy.skip_reason is None
        # The variant's points in the plan and how many a run before this one measured (the live view's row)
        emit("progress", {"message": f"{variant.name}: {len(todo)} of {len(plan.points())} points to measure",
                          "kind": "bench", "variant": variant.name, "points": len(plan.points()),
                          "measured": len(plan.points()) - len(todo)})
        del later[variant.name]
        needed, running = _server_need(executor, plan, variant, results_dir)
        # One server at a time: its own, else those later variants re-attach to (the rest are leftovers)
        keep = {running} if needed else {key for wanted, key in later.values() if wanted}
        refused = stop_leftover_servers(executor, keep, emit)
        if not needed:
            emit("progress", {"message": f"{variant.name}: every point already measured"})
            continue
        if refused:  # never a second server beside one we could not stop, on the GPUs it holds
            _fail_points(results_dir, variant, todo, "not started beside a server of this run that could not be "
                                                      f"stopped: {'; '.join(refused)}", "", out)
            continue
        _sweep_variant(executor, plan, variant, python, results_file, todo, env, bench_env, emit, out,
                       ready_timeout_s, point_timeout_s, check_accuracy,
                       on_measured if variant is plan.variants[-1] else None)
    stop_leftover_servers(executor, set(), emit)  # a refusal here is the campaign's to report (agent/campaign/start_resume.py)
    return out


def _baseline_levels(plan: MeasurePlan, results_dir: Path) -> set[int]:
    """The concurrency levels at which the baseline has a measured point."""
    finished = finished_points(results_dir / f"{BASELINE}.jsonl", BASELINE)
    return {p.concurrency for p in plan.points() if p.tag(BASELINE) in finished}


def _without_baseline(plan: MeasurePlan, results_dir: Path, variant: ServeVariant, todo: list[BenchPoint],
                      emit: EventSink, out: SweepResult) -> bool:
    """Fail the variant's points at levels where the baseline was not measured (a ratio needs it: GPU time
    spent there decides nothing); True when some were. With no baseline level at all the sweep stops."""
    measured = _baseline_levels(plan, results_dir)
    blocked = [p for p in todo if p.concurrency not in measured]
    if not blocked:
        return False
    levels = ", ".join(str(c) for c in sorted({p.concurrency for p in blocked}))
    _fail_points(results_dir, variant, blocked, f"not measured: the baseline was not measured at concurrency "
                 f"{levels}, so nothing here could be compared; resume measures the baseline first", "", out)
    if not measured:
        emit("error", {"error": "baseline_not_measured", "message": f"{variant.name}: not measured, the baseline "
                       "was not measured at any concurrency: the sweep stops (resume measures the baseline first)"})
    return True


def _server_need(executor: Executor, plan: MeasurePlan, variant: ServeVariant,
                 results_dir: Path) -> tuple[bool, str | None]:
    """(the variant needs a server: points or its accuracy check left, or the closing snapshot of a point
    measured while the agent was away; the key of its server attempt that still runs)."""
    finished = finished_points(results_dir / f"{variant.name}.jsonl", variant.name)
    accuracy = plan.accuracy is not None and plan.accuracy.skip_reason is None
    running = running_server(executor, variant)
    pending = pending_befores(snapshot_file(results_dir, variant.name))
    return (any(p.tag(variant.name) not in finished for p in plan.points()) or bool(pending and running)
            or (accuracy and not result_file(results_dir, variant.name).exists())), running


def _sweep_variant(executor, plan, variant, python, results_file, todo, env, bench_env, emit, out,
                   ready_timeout_s, point_timeout_s, check_accuracy, on_measured) -> None:
    """One variant's server (new or re-attached) and its points still to measure."""
    results_dir = results_file.parent
    keys: list[str] = []
    try:
        server = start_server(executor, plan, variant, python, env, ready_timeout_s, emit, keys)
        key = server.key
    except ToolError as err:
        out.server_logs[variant.name] = str(executor.job_dir(server_job(variant.name)) / "log.txt")
        _fail_points(results_dir, variant, todo, f"server was not ready: {err}", out.server_logs[variant.name], out)
        emit("error", {"error": "server_not_ready", "message": f"{variant.name}: server failed",
                       "key": server_job(variant.name)})
        if keys:  # launched (its job_launched is in the trace): it ended here
            emit("job_finished", {"key": keys[-1], "kind": "serve", "status": "failed"})
        return
    out.server_logs[variant.name] = server.log_path
    emit("progress", {"message": f"{variant.name}: server ready at {server.url}", "key": key, "ready": True,
                      "variant": variant.name})
    try:
        for tag in sorted(pending_befores(snapshot_file(results_dir, variant.name))
                          - {p.tag(variant.name) for p in todo}):
            _after_snapshot(python, executor, server, tag, results_file)  # measured while the agent was away
        for number, point in enumerate(todo):
            emit("progress", {"message": f"{variant.name}: point {number + 1} of {len(todo)}", "key": key})
            emit("progress", {"message": f"{variant.name}: concurrency {point.concurrency}, "
                                         f"{point.num_prompts} prompts", "key": point_job(variant.name, point),
                              "kind": "bench", "variant": variant.name})
            job, failure = run_point(executor, plan, variant, point, python, server, results_file,
                                     bench_env, point_timeout_s, emit)
            if failure is None:
                out.done.append(point.tag(variant.name))
                emit("job_finished", {"key": job, "kind": "bench", "variant": variant.name, "status": "succeeded"})
            else:
                _record_failure(results_dir, failure)
                out.failures.append(failure)
                emit("job_finished", {"key": job, "kind": "bench", "variant": variant.name, "status": "failed",
                                      "reason": failure.reason.splitlines()[0]})
        emit("progress", {"message": f"{variant.name}: {len(todo)} points measured", "key": key})
        if on_measured is not None:
            on_measured()
        if check_accuracy:
            _check_accuracy(executor, plan, variant, python, server, results_dir, bench_env, emit)
    finally:
        state = stop_server(executor, server.key)
        emit("job_finished", {"key": server.key, "kind": "serve", "status": state.status})


def _check_accuracy(executor: Executor, plan: MeasurePlan, variant: ServeVariant, python: str,
                    server: ServerHandle, results_dir: Path, env: dict[str, str], emit: EventSink) -> None:
    """SGLang's GSM8K check against this variant's server, after its benchmark points."""
    emit("progress", {"message": f"{variant.name}: GSM8K accuracy, {plan.accuracy.questions} questions"})
    local = not (executor.capabilities.remote_host or executor.capabilities.servers_on_nodes)
    folder = results_dir / "accuracy"
    folder.mkdir(parents=True, exist_ok=True)
    run_accuracy(executor, plan.accuracy, variant.name, python, server.host, server.port, results_dir, env,
                 cwd=str(folder.resolve()) if local else None, emit=emit)  # the check writes a file where it runs
