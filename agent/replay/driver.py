"""Re-drives a recorded campaign offline and checks that every decision comes out the same.

The real campaign machinery runs on the recorded goal and settings in a scratch run folder; what
touches the world is served from the record (``ReplaySource``, ``ReplayLLM``), so no GPU, network,
model or job is used. A ``DecisionChecker`` stops at the first difference. Attempts are re-driven in
turn; one the recorded agent did not finish stops where it stopped (agent/replay/frontier.py) and
the next resumes from there.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from agent.exit_codes import ExitCode
from agent.run.run_files import CONFIG, RESULT
from agent.campaign.checkpoints import set_checkpoint_aside
from agent.settings.model import Settings
from agent.run.disk import DiskFull
from agent.campaign.early_lane import wait_for_early_lanes
from agent.campaign.interrupts import SignalWatch
from agent.terminal.live import LiveView
from agent.replay.checker import DecisionChecker, Divergence, ReplayDivergence, ReplayStop
from agent.replay.frontier import Frontier, ReplayCut
from agent.replay.record import Attempt, Recording, RecordError, load_recording
from agent.replay.served import ReplayLLM, ReplaySource
from agent.run.folder import RunFolder
from agent.campaign.runtime import Runtime
from agent.run.trace import TraceWriter
from tools.jobs.local import LocalExecutor
from tools.measure.search_replay import SearchCheck, check_search
from tools.stop import reset as reset_stop_gate

@dataclass
class ReplayReport:
    run_dir: Path
    matched: int                    # recorded decisions reproduced
    total: int                      # recorded decisions
    events: int                     # good events in the record
    divergence: Divergence | None
    stopped: str | None             # the record ended early (truncated/corrupt); None otherwise
    plan_same: bool | None          # replanned steps == plan.json (None: no plan recorded)
    uses_llm: bool
    notes: list[str] = field(default_factory=list)
    search: SearchCheck | None = None  # a budgeted search's decisions, re-derived from the run folder

    @property
    def exit_code(self) -> ExitCode:
        if self.divergence is not None or self.plan_same is False or (self.search and self.search.problems):
            return ExitCode.FAILED
        return ExitCode.CUT_SHORT if self.stopped else ExitCode.DONE

    def render(self) -> str:
        mode = "LLM answers served from the record" if self.uses_llm else "deterministic playbook"
        head = f"replay of {self.run_dir} ({mode}; {self.events} events, {self.total} decisions)"
        lines = [head, *[f"note: {n}" for n in self.notes]]
        if self.search is not None:
            lines.append(("DIVERGED: " if self.search.problems else "") + self.search.text())
        if self.divergence is not None:
            lines.append(f"DIVERGED after {self.matched} matching decisions: {self.divergence.describe()}")
        elif self.plan_same is False:
            lines.append("DIVERGED: the replanned steps differ from plan.json")
        elif self.stopped:
            lines.append(f"reproduced {self.matched} of {self.total} decisions, then stopped: {self.stopped}")
        else:
            lines.append(f"reproduced: all {self.total} decisions came out the same"
                         + ("; plan identical to plan.json" if self.plan_same else ""))
        return "\n".join(lines)


def replay_settings(recording: Recording, runs_dir: Path) -> tuple[Settings, list[str]]:
    """The recorded settings (agent/settings/of_run.py: nothing runs, so the record's values stand), the
    values the last resume replaced, pointed at a scratch folder."""
    from agent.settings.of_run import known_settings, settings_of_run

    earlier: dict = {}
    for resumed in reversed([a.opening for a in recording.attempts[1:]]):  # config.json holds the last values
        earlier.update(known_settings(resumed.get("previous") or {})[0])
    found = settings_of_run(recording.run_dir, {**earlier, "runs_dir": str(runs_dir)}, "replay")
    notes = [f"recorded settings this build does not know were ignored: {', '.join(found.dropped)}"] \
        if found.dropped else []
    return found.settings, notes


def replay_run(run_dir: Path | str, work_dir: Path | str | None = None,
               say: Callable[[str], None] = lambda line: None) -> ReplayReport:
    """Replay ``run_dir``; ``work_dir`` keeps the replayed run folder (default: a temp dir, removed)."""
    recording = load_recording(run_dir)
    if work_dir is not None:
        return _replay_into(recording, Path(work_dir), say)
    with tempfile.TemporaryDirectory(prefix="dsv4-replay-") as tmp:
        return _replay_into(recording, Path(tmp), say)


def _replay_into(recording: Recording, work_dir: Path, say: Callable[[str], None]) -> ReplayReport:
    settings, notes = replay_settings(recording, work_dir)
    run = RunFolder.create(work_dir, recording.goal)
    run.lock()
    run.write_json(CONFIG, {"goal": recording.goal, "settings": settings.public_dump(),
                                   "replay_of": str(recording.run_dir)})
    trace = TraceWriter(run.trace_path)
    frontier = Frontier()
    source = ReplaySource(recording, frontier)
    rt = Runtime(settings=settings, run=run, trace=trace, executor=LocalExecutor(run.jobs_dir),
                 goal=recording.goal, say=say,
                 view=LiveView(force_plain=True),  # _drive restores it on ^C
                 source=source, llm=ReplayLLM(recording, trace, frontier) if recording.uses_llm else None)
    checker = DecisionChecker(recording, frontier, replay_paths=[str(run.path), str(run.path.resolve())])
    trace.gates.append(checker.admit)
    trace.listeners.append(checker.observe)
    attempts = recording.attempts
    try:
        for attempt in attempts:
            checker.begin(attempt.index)
            source.begin(attempt.index)
            _replay_attempt(rt, recording, attempt, frontier, last=attempt.index == len(attempts) - 1)
    except ReplayDivergence as err:  # the checker's own, or a served event that disagrees with the run's files
        checker.divergence = checker.divergence or err.divergence
    except ReplayStop:
        pass  # the checker holds what happened
    finally:
        frontier.disarm()
        trace.close()
        run.unlock()
    divergence = checker.finish()
    if attempts[-1].killed and divergence is None and checker.stopped is None:
        checker.stopped = recording.stop_reason or "the recording ends without run_finished (the agent died)"
    plan_same = None
    replanned = run.plan()
    if recording.plan is not None and replanned is not None:
        plan_same = replanned == recording.plan
    return ReplayReport(run_dir=recording.run_dir, matched=checker.matched, total=checker.total,
                        events=len(recording.events), divergence=divergence, stopped=checker.stopped,
                        plan_same=plan_same, uses_llm=recording.uses_llm, notes=notes,
                        search=check_search(recording.run_dir, recording.events))


def _replay_attempt(rt: Runtime, recording: Recording, attempt: Attempt, frontier: Frontier, last: bool) -> None:
    """Re-drive one recorded attempt as ``start`` or ``resume`` drove it, stopping where it stopped."""
    from agent.campaign.start_resume import _drive  # the campaign's own driver: graph, checkpoint, result.json

    thread, fresh = _open_attempt(rt, recording, attempt)
    watch = SignalWatch()
    signal_name = (attempt.finish or {}).get("signal") or "SIGINT"
    if attempt.disk_full:
        frontier.arm(True, lambda: watch.fault(DiskFull()))  # the recorded full disk, where it struck
    elif attempt.interrupted:
        frontier.arm(True, lambda: watch.inject(signal_name))  # the recorded Ctrl-C, where it came
    else:
        frontier.arm(attempt.killed and not last, frontier.release)  # the recorded kill, where it came
    try:
        _drive(rt, thread, fresh, watch=watch, hard_exit=False)
    except ReplayCut:
        pass  # the attempt ended where the recorded agent was killed
    finally:
        frontier.release()
        if watch.worker is not None:
            watch.worker.join(60)  # the held lanes unwind before the next attempt begins
        wait_for_early_lanes(60)
        frontier.disarm()
        reset_stop_gate()


def _open_attempt(rt: Runtime, recording: Recording, attempt: Attempt) -> tuple[str, bool]:
    """Write what ``start``/``resume`` wrote before driving; the graph thread and whether it starts fresh."""
    opening = attempt.opening
    if attempt.index == 0:
        served = {k: opening[k] for k in ("started_over", "config_file", "checkpoints_traced") if k in opening}
        rt.trace_checkpoints = bool(opening.get("checkpoints_traced"))  # as the recorded agent did
        rt.trace.emit("run_started", "control", goal=recording.goal, run=rt.run.path.name, argv=opening.get("argv", []),
                      **served)
        return "attempt-1", True
    result = rt.run.result
    earlier = sorted(rt.run.path.glob("result.attempt-*.json"))
    if result is not None:
        (rt.run.path / RESULT).replace(rt.run.path / f"result.attempt-{len(earlier) + 1}.json")
    thread = f"attempt-{len(earlier) + 1 + (result is not None)}"
    served = {k: opening[k] for k in ("changed", "previous", "retry_granted", "redone", "dropped_tail", "seq_gaps",
                                      "rebuilt_checkpoint", "gpus_changed", "checkpoints_traced") if k in opening}
    rt.trace_checkpoints = bool(opening.get("checkpoints_traced"))
    rt.settings = _with_changes(rt.settings, served.get("changed") or {})
    rt.run.forget_outcomes(served.get("redone") or [])  # as the recorded resume did: those steps run again
    if served.get("rebuilt_checkpoint"):  # as the recorded resume did: the graph starts afresh
        set_checkpoint_aside(rt.run)
    rt.trace.emit("run_resumed", "control", run=rt.run.path.name, thread=thread,
                  after=(result or {}).get("status"), **served)
    return thread, result is not None or bool(served.get("rebuilt_checkpoint") or served.get("gpus_changed"))


def _with_changes(settings: Settings, changed: dict) -> Settings:
    """The settings a resume gave anew (an LLM budget, say); where the run's files live stays the replay's."""
    keep = ("runs_dir", "executor", "llm_api_key")
    update = {k: v for k, v in changed.items() if k in Settings.model_fields and k not in keep}
    return Settings.model_validate({**settings.model_dump(), **update}) if update else settings


__all__ = ["replay_run", "ReplayReport", "RecordError"]
