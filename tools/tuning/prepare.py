"""Decide what to tune before any GPU work: shapes (and where they came from), which already have
configs for this GPU, and whether the Triton path is engaged at all."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.checkpoint.config import CheckpointConfig
from tools.tuning.configs import config_file_name, find_config_dir
from tools.tuning.engagement import EngagementArgs, EngagementResult, check_engagement
from tools.tuning.shapes import FindShapesArgs, Shape, find_shapes


class PrepareTuningArgs(BaseModel):
    """Work out which FP8 block-GEMM shapes to tune on this setup, and whether tuning would matter."""

    shapes: list[str] = Field(default_factory=list, description="User shapes 'N,K'")
    log_files: list[str] = Field(default_factory=list, description="Server logs to mine and to read engagement from")
    model_path: str | None = Field(None, description="Checkpoint folder or config.json")
    checkpoint_config: CheckpointConfig | None = Field(None, description="Its config.json, already read (None: "
                                                       "read from model_path)")
    tp: int = Field(1, description="Tensor-parallel size")
    sglang_root: str | None = Field(None, description="SGLang source root (checkout, package or wheel)")
    device_name: str = Field("", description="GPU name the configs are for ('' = unknown)")
    retune: bool = Field(False, description="Tune shapes that already have configs")
    force_tune: bool = Field(False, description="Tune even when evidence says Triton is not used")
    server_args: list[str] = Field(default_factory=list, description="Server flags the benchmark uses")
    env: dict[str, str] = Field(default_factory=dict, description="Server environment")


SkipKind = Literal["no_shapes", "no_block_fp8", "all_configured", "not_engaged"]
# Why a tuning run ended as it did: a skip kind, or one of these.
TuningReason = Literal[SkipKind, "not_engaged_no_discovery", "discovery_found_nothing", "no_tuning_script",
                       "no_gpu", "plan_only", "tuning_input_error", "discovery_failed", "tuning_jobs_failed", "install_failed",
                       "already_installed", "tuned"]


class TuningPreparation(BaseModel):
    shapes: list[Shape]
    derivation: list[str]
    shapes_note: str
    device_name: str
    config_dir: str | None
    skipped_existing: dict[str, str] = Field(description="'N,K' -> existing config file")
    to_tune: list[Shape]
    engagement: EngagementResult
    decision: str = Field(description="tune | skip")
    reason: str
    skip_kind: SkipKind | Literal[""] = Field("", description="Why skipped ('' when tuning)")


def prepare_tuning(args: PrepareTuningArgs) -> TuningPreparation:
    found = find_shapes(FindShapesArgs(shapes=args.shapes, log_files=args.log_files, model_path=args.model_path,
                                       config=args.checkpoint_config, tp=args.tp))
    device = args.device_name or found.device_name
    log_text = "\n".join(Path(p).read_text(errors="replace") for p in args.log_files if Path(p).exists())
    block_n, block_k = (found.shapes[0].block_n, found.shapes[0].block_k) if found.shapes else (128, 128)
    engagement = check_engagement(EngagementArgs(log_text=log_text, server_args=args.server_args, env=args.env,
                                                 gpu_name=device.replace("_", " "), sglang_root=args.sglang_root,
                                                 block_k=block_k, block_n=block_n))
    config_dir: Path | None = None
    notes = []
    if args.sglang_root:
        try:
            config_dir = find_config_dir(Path(args.sglang_root))
        except ToolError as err:
            notes.append(str(err))
    existing: dict[str, str] = {}
    if config_dir is not None and device:
        for shape in found.shapes:
            path = config_dir / config_file_name(shape.n, shape.k, device, shape.block_n, shape.block_k)
            if path.exists():
                existing[shape.key] = str(path)
    elif not device and found.shapes:
        notes.append("GPU name unknown here, so existing configs could not be looked up")
    to_tune = list(found.shapes) if args.retune else [s for s in found.shapes if s.key not in existing]
    decision, reason, skip_kind = "tune", "", ""
    if not found.shapes:
        decision, reason = "skip", found.note
        skip_kind = "no_block_fp8" if found.no_block_fp8 else "no_shapes"
    elif not to_tune:
        decision, reason = "skip", (f"all {len(found.shapes)} shapes already have configs for {device} in {config_dir}; "
                                    "--retune tunes them again")
        skip_kind = "all_configured"
    elif engagement.verdict == "not_engaged" and not args.force_tune:
        decision, reason = "skip", ("the Triton block-FP8 path is not used on this setup, tuning it would change "
                                    "nothing (--force-tune to tune anyway): " + "; ".join(engagement.evidence))
        skip_kind = "not_engaged"
    if notes:
        reason = "; ".join(filter(None, [reason, *notes]))
    return TuningPreparation(shapes=found.shapes, derivation=found.derivation, shapes_note=found.note, device_name=device,
                             config_dir=str(config_dir) if config_dir else None, skipped_existing=existing,
                             to_tune=to_tune, engagement=engagement, decision=decision, reason=reason,
                             skip_kind=skip_kind)


PREPARE_TUNING = Tool(name="prepare_kernel_tuning", args=PrepareTuningArgs, run=prepare_tuning)
