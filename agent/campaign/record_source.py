"""Where a campaign's facts come from: the world (``LiveSource``) or a recorded run (``ReplaySource``).

Five things touch the world: preflight, running a step, the LLM research span, which jobs still run
and stopping the servers a run left. Nodes and lanes ask ``rt.source`` for each, never knowing which
source it is; a replay (``agent.replay.served.ReplaySource``) serves them all from the record.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

from agent.settings.model import Settings
from agent.campaign.preflight import Preflight, run_preflight
from agent.steps.base import PlanStep, StepOutcome
from tools.jobs import Executor, JobState

if TYPE_CHECKING:
    from agent.run.folder import RunFolder
    from tools.gpu_choice import GpuChoice


class RecordSource(Protocol):
    starts_jobs: bool  # steps run for real, so jobs start (a replay serves their outcomes instead)

    def preflight(self, settings: Settings, executor: Executor) -> Preflight:
        """What this machine and configuration give the campaign."""

    def early_preflight(self, settings: Settings, executor: Executor) -> Preflight | None:
        """The preflight, asked for before the graph exists (agent/campaign/early_lane.py); None: the graph's
        preflight node finds it in its turn."""

    def step_outcome(self, run: "RunFolder", step: PlanStep, execute: Callable[[], StepOutcome]) -> StepOutcome:
        """The outcome of ``step``; ``execute`` runs it for real."""

    def span_outcome(self, run: "RunFolder", tool: str, outcome_file: Path, execute: Callable[[], dict]) -> dict:
        """The outcome of a span the orchestration runs outside the plan's steps (tool ``tool``,
        its outcome kept in ``outcome_file``); ``execute`` runs it for real and writes that file."""

    def running_jobs(self, executor: Executor) -> list[str]:
        """Keys of the run's jobs still running (an interrupted run's result names them)."""

    def stop_servers(self, run: "RunFolder", executor: Executor) -> tuple[list[JobState], list[str]]:
        """Stop the run's server jobs that still run, as the run ends: (those stopped, why each one
        that could not be stopped still runs)."""


class LiveSource:
    """The world as it is: preflight is detected, steps and spans run.

    ``gpus_checked`` is the GPU check the campaign made before its first step (agent.campaign.start_resume):
    the preflight takes it instead of running nvidia-smi a second time a moment later."""

    starts_jobs = True

    def __init__(self, gpus_checked: GpuChoice | None = None):
        self.gpus_checked = gpus_checked

    def preflight(self, settings: Settings, executor: Executor) -> Preflight:
        checked, self.gpus_checked = self.gpus_checked, None  # once: a later preflight asks again
        return run_preflight(settings, executor, checked)

    def early_preflight(self, settings: Settings, executor: Executor) -> Preflight | None:
        return self.preflight(settings, executor)

    def step_outcome(self, run: "RunFolder", step: PlanStep, execute: Callable[[], StepOutcome]) -> StepOutcome:
        return execute()

    def span_outcome(self, run: "RunFolder", tool: str, outcome_file: Path, execute: Callable[[], dict]) -> dict:
        return execute()

    def running_jobs(self, executor: Executor) -> list[str]:
        return [j.key for j in executor.jobs() if not j.done]

    def stop_servers(self, run: "RunFolder", executor: Executor) -> tuple[list[JobState], list[str]]:
        from tools.base import ToolError
        from tools.measure.server import SERVER_KINDS, stop_servers

        if not any(p.name.startswith(SERVER_KINDS) for p in run.jobs_dir.glob("*")):
            return [], []  # no server was ever started for this run: no executor call (SSH) to make
        try:
            return stop_servers(executor)
        except (ToolError, OSError) as err:
            return [], [f"the run's server jobs could not be checked ({err}), so none is known to be stopped"]
