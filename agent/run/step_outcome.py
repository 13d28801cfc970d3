"""What a step returns (``StepOutcome``), also its record ``steps/<kind>.json`` in the run folder: here,
beside the run folder's readers (agent/run/run_files.py), so the report and replay read it typed."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from tools.tuning.prepare import TuningReason

StepKind = Literal["sync", "tune_kernels", "infer_mtp", "write_scripts", "benchmark"]  # rows: agent/steps/step_table.py
StepStatus = Literal["done", "planned", "skipped", "failed"]
# Why a step ended as it did, as a code for programs (tests, the CLI); the summary says it for people.
StepReason = Literal[
    "tool_error",                                   # any step: a tool refused (the summary has its message)
    "synced", "sync_refused",                       # sync
    "recommended", "no_recommendation", "inference_failed",  # infer_mtp
    "scripts_written",                              # write_scripts
    "measured", "points_failed", "nothing_measured", "no_gpu",  # benchmark (no_gpu: planned, scripts to run by hand)
    "plan_only",                                    # benchmark, tune_kernels: --plan-only held the GPU jobs
] | TuningReason                                    # tune_kernels: tools/tuning/prepare.py


class StepOutcome(BaseModel):
    kind: StepKind
    status: StepStatus
    summary: str
    reason: StepReason | None = Field(None, description="Why it ended so; None only in runs recorded before codes")
    artifacts: list[str] = Field(default_factory=list, description="Paths relative to the run folder")
    data: dict[str, Any] = Field(default_factory=dict, description="Small, JSON-able facts for later steps")
