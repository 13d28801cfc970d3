"""What the tuning decision tree takes (``TuneKernelsArgs``), returns (``TuningOutcome``) and writes
through (``Recorder``: the campaign's step context satisfies it). See ``tools/tuning/tune.py``."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from tools.checkpoint.config import CheckpointConfig
from tools.gpu_choice import GpuPlan
from tools.gpus import GpuInfo
from tools.tuning.plan import DEFAULT_BATCH_SIZES
from tools.tuning.prepare import TuningPreparation, TuningReason

TUNING_DIR = "tuning"  # under the run folder


class TuneKernelsArgs(BaseModel):
    """Everything the decision tree needs, as the campaign resolved it."""

    model: str = Field(description="Model id (the discovery server's model when there is no model_path)")
    model_path: str | None = Field(None, description="Checkpoint folder (config.json) of the model")
    checkpoint_config: CheckpointConfig | None = Field(None, description="Its config.json as the campaign read it "
                                                       "(None: read from model_path for the shapes)")
    sglang_root: str | None = Field(None, description="The SGLang source read here (scripts, config lookups)")
    sglang_src: str | None = Field(None, description="The SGLang checkout the user named, if any")
    sglang_python: str = Field(description="Interpreter with SGLang where the jobs run")
    gpus: list[GpuInfo] = Field(default_factory=list, description="GPUs where the jobs run (empty: none here)")
    gpu_plan: GpuPlan = Field(description="The campaign's GPU plan (preflight's): one job per GPU of its "
                              "tuning_gpus, shapes split at its TP, as the serve scripts name them")
    start_jobs: bool = Field(True, description="False (--plan-only): write every script, start no GPU job")
    shapes: list[str] = Field(default_factory=list, description="User shapes 'N,K'")
    retune: bool = Field(False, description="Tune shapes that already have configs")
    force_tune: bool = Field(False, description="Tune even where the Triton path is not engaged")
    log_files: list[str] = Field(default_factory=list, description="Server logs to mine")
    server_args: list[str] = Field(default_factory=list, description="How the benchmark server will start")
    env: dict[str, str] = Field(default_factory=dict, description="The server's environment on top of ours")
    device_name: str = Field("", description="The target GPU when planning without one")
    batch_sizes: list[int] = Field(default_factory=lambda: list(DEFAULT_BATCH_SIZES))
    config_dir: str | None = Field(None, description="Install target override")
    poll_s: float = 1.0
    timeout_s: float | None = None
    discovery_timeout_s: float = 1800.0


class TuningOutcome(BaseModel):
    status: Literal["done", "planned", "skipped", "failed"]
    reason: TuningReason
    summary: str
    artifacts: list[str] = Field(default_factory=list, description="Paths relative to the run folder")
    data: dict[str, Any] = Field(default_factory=dict)


class Recorder(Protocol):
    """Where the tree writes its run-folder files and its trace events (the campaign's step context)."""

    def write_artifact(self, relative: str, text: str) -> Path: ...

    def emit(self, type: str, **data: Any) -> None: ...


def outcome(status: str, reason: TuningReason, summary: str, prep: TuningPreparation | None, artifacts: list[str],
            **data: Any) -> TuningOutcome:
    facts: dict[str, Any] = {"shapes": [], "derivation": [], "skipped_existing": {}, "installed": [],
                             "manifest": None, "engaged": None}
    if prep is not None:
        facts.update(shapes=[s.model_dump() for s in prep.shapes], derivation=prep.derivation,
                     skipped_existing=prep.skipped_existing,
                     engaged={"verdict": prep.engagement.verdict, "evidence": prep.engagement.evidence})
    facts.update(data)
    return TuningOutcome(status=status, reason=reason, summary=summary, artifacts=artifacts, data=facts)
