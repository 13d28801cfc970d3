"""What a step gets (``StepContext``) and what it returns (``StepOutcome``, agent/run/step_outcome.py).

Steps must be idempotent: after a hard kill LangGraph re-runs every node that had not
committed, so a step that launches jobs does it through the executor (which re-attaches by
job key) and a step that writes files overwrites them atomically.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from agent.settings.model import Settings
from agent.run.folder import RunFolder
from agent.run.step_outcome import StepKind, StepOutcome, StepReason, StepStatus  # noqa: F401  the steps' face
from agent.run.trace import Lane, TraceWriter
from tools.base import ToolError
from tools.gpus import GpuInfo
from tools.jobs import Executor

if TYPE_CHECKING:
    from tools.checkpoint.config import CheckpointConfig
    from tools.checkpoint.facts import CheckpointFacts
    from tools.checkpoint.architecture import Architecture
    from tools.gpu_choice import GpuPlan
    from tools.mtp.settings import MtpSettings


class PlanStep(BaseModel):
    kind: StepKind
    lane: Lane
    why: str = Field(description="Why the planner chose this step (from the goal's words)")
    params: dict[str, Any] = Field(default_factory=dict)


@dataclass
class StepContext:
    settings: Settings
    run: RunFolder
    trace: TraceWriter
    executor: Executor
    gpus: list[GpuInfo]
    sglang_root: Path | None              # resolved SGLang source root (None: not resolved)
    outcomes: dict[str, StepOutcome] = field(default_factory=dict)  # earlier steps, by kind
    lane: Lane = "control"
    gpu_plan: GpuPlan | None = None       # preflight's one GPU plan (None: a step that starts no GPU work)
    mtp_settings: MtpSettings | None = None  # worked out before the run (--mtp-steps checked up front)
    checkpoint: CheckpointFacts | None = None  # the checkpoint in hand, read once by preflight
    checkpoint_config: CheckpointConfig | None = None  # its config.json as preflight read it (the tuning's shapes)
    architecture: Architecture | None = None  # the model's architecture, decided once by preflight

    @property
    def has_gpus(self) -> bool:
        return bool(self.gpus)

    @property
    def may_start_gpu_jobs(self) -> bool:
        """GPUs are there and the user did not ask to review the scripts first (--plan-only)."""
        return self.has_gpus and not self.settings.plan_only

    def planned_gpus(self) -> GpuPlan:
        """Preflight's GPU plan, taken as it is by tuning, scripts and servers (never made again here)."""
        if self.gpu_plan is None:
            raise ToolError("this step needs the campaign's GPU plan, which preflight makes; run it through "
                            "`dsv4-agent` (or resume the run) so preflight plans the GPUs first")
        return self.gpu_plan

    def why_planned(self) -> str:
        """Why a GPU step only writes its scripts, for its summary (see ``may_start_gpu_jobs``)."""
        if self.has_gpus:
            return (f"--plan-only: written for review, no GPU job started; `dsv4-agent resume {self.run.path}` "
                    "starts them")
        return "no GPU here"

    def emit(self, type: str, **data: Any) -> None:
        self.trace.emit(type, self.lane, **data)

    def progress(self, message: str, **data: Any) -> None:
        """A line for the live view and the trace."""
        self.trace.emit("progress", self.lane, message=message, **data)

    def write_artifact(self, relative: str, text: str) -> Path:
        """Write a file into the run folder atomically and record it in the trace."""
        path = self.run.write_text(relative, text)
        self.emit("artifact_written", path=relative, bytes=len(text.encode()))
        return path
