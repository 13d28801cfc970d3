"""Re-drives a recorded campaign offline and checks that every decision comes out the same.

The real campaign machinery runs (graph, planner, lanes, join, report) on the recorded goal and
settings, in a scratch run folder; what touches the world is served from the record instead:
preflight, each step's outcome (``ReplaySource``) and the LLM's answers (``ReplayLLM``). No GPU,
network, model or job is used. A ``DecisionChecker`` listens to the new trace and stops at the
first difference. Attempts of a resumed run are re-driven in turn, as ``resume`` would.
"""
from __future__ import annotations

import io
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rich.console import Console

from agent.config import Settings
from agent.live import LiveView
from agent.replay.checker import DecisionChecker, Divergence, ReplayDivergence, ReplayStop
from agent.replay.record import Recording, RecordError, load_recording
from agent.replay.served import ReplayLLM, ReplaySource
from agent.runfolder import RunFolder
from agent.runtime import Runtime
from agent.trace import TraceWriter
from tools.jobs.local import LocalExecutor

EXIT_REPRODUCED, EXIT_DIVERGED, EXIT_CUT_SHORT = 0, 1, 3


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

    @property
    def exit_code(self) -> int:
        if self.divergence is not None or self.plan_same is False:
            return EXIT_DIVERGED
        return EXIT_CUT_SHORT if self.stopped else EXIT_REPRODUCED

    def render(self) -> str:
        mode = "LLM answers served from the record" if self.uses_llm else "deterministic playbook"
        head = f"replay of {self.run_dir} ({mode}; {self.events} events, {self.total} decisions)"
        lines = [head, *[f"note: {n}" for n in self.notes]]
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
    """The recorded settings, minus what this build no longer knows, pointed at a scratch folder."""
    known = {k: v for k, v in recording.settings.items() if k in Settings.model_fields}
    dropped = sorted(set(recording.settings) - set(known))
    known.update(llm_api_key=None, runs_dir=str(runs_dir), executor="local")
    notes = [f"recorded settings this build does not know were ignored: {', '.join(dropped)}"] if dropped else []
    return Settings.model_validate(known), notes


def _attempts(recording: Recording) -> list[dict]:
    return [e for e in recording.events if e["type"] == "run_resumed"]


def replay_run(run_dir: Path | str, work_dir: Path | str | None = None,
               say: Callable[[str], None] = lambda line: None) -> ReplayReport:
    """Replay ``run_dir``; ``work_dir`` keeps the replayed run folder (default: a temp dir, removed)."""
    recording = load_recording(run_dir)
    if work_dir is not None:
        return _replay_into(recording, Path(work_dir), say)
    with tempfile.TemporaryDirectory(prefix="dsv4-replay-") as tmp:
        return _replay_into(recording, Path(tmp), say)


def _replay_into(recording: Recording, work_dir: Path, say: Callable[[str], None]) -> ReplayReport:
    from agent.campaign import _drive  # the campaign's own driver: graph, checkpoint, result.json

    settings, notes = replay_settings(recording, work_dir)
    run = RunFolder.create(work_dir, recording.goal)
    run.lock()
    run.write_json("config.json", {"goal": recording.goal, "settings": settings.public_dump(),
                                   "replay_of": str(recording.run_dir)})
    trace = TraceWriter(run.trace_path)
    rt = Runtime(settings=settings, run=run, trace=trace, executor=LocalExecutor(run.jobs_dir),
                 goal=recording.goal, say=say,
                 view=LiveView(console=Console(file=io.StringIO()), force_plain=True),  # _drive restores it on ^C
                 source=ReplaySource(recording), llm=ReplayLLM(recording, trace) if recording.uses_llm else None)
    checker = DecisionChecker(recording)
    trace.listeners.append(checker.observe)
    first = recording.events[0]
    try:
        trace.emit("run_started", "control", **{k: first[k] for k in ("goal", "run", "argv") if k in first})
        _drive(rt, "attempt-1", fresh=True)
        for resumed in _attempts(recording):
            if resumed.get("after") is None:
                notes.append("the run was resumed after a crash; replay covers the attempts before it")
                break
            trace.emit("run_resumed", "control", run=resumed.get("run"), thread=resumed.get("thread"),
                       after=resumed.get("after"))
            (run.path / "result.json").replace(run.path / f"result.{resumed.get('thread')}.json")
            _drive(rt, resumed.get("thread", "attempt-next"), fresh=True)
    except (ReplayDivergence, ReplayStop):
        pass  # the checker holds what happened
    finally:
        trace.close()
        run.unlock()
    divergence = checker.finish()
    plan_same = None
    if recording.plan is not None and (run.path / "plan.json").exists():
        plan_same = json.loads((run.path / "plan.json").read_text()) == recording.plan
    if checker.stopped is None and recording.stop_reason and divergence is None:
        checker.stopped = recording.stop_reason
    return ReplayReport(run_dir=recording.run_dir, matched=checker.matched, total=checker.total,
                        events=len(recording.events), divergence=divergence, stopped=checker.stopped,
                        plan_same=plan_same, uses_llm=recording.uses_llm, notes=notes)


__all__ = ["replay_run", "ReplayReport", "RecordError", "EXIT_REPRODUCED", "EXIT_DIVERGED", "EXIT_CUT_SHORT"]
