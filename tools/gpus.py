"""GPU discovery through ``nvidia-smi`` (the real binary, or a double on PATH in tests)."""
from __future__ import annotations

import shutil
import subprocess

from pydantic import BaseModel, Field

from tools.base import Tool


class GpuInfo(BaseModel):
    index: int
    name: str
    memory_mib: int


class DetectGpusArgs(BaseModel):
    """List the NVIDIA GPUs on this machine (index, name, memory) using nvidia-smi."""

    nvidia_smi: str = Field("nvidia-smi", description="nvidia-smi binary to run")
    only: list[int] | None = Field(None, description="Keep only these GPU indices")


class DetectGpusResult(BaseModel):
    gpus: list[GpuInfo]
    note: str = Field("", description="Why the list is empty, when it is")


def detect_gpus(args: DetectGpusArgs) -> DetectGpusResult:
    binary = shutil.which(args.nvidia_smi)
    if binary is None:
        return DetectGpusResult(gpus=[], note=f"{args.nvidia_smi} not found on PATH: no NVIDIA GPU here")
    try:
        out = subprocess.run(
            [binary, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30,
        )
    except subprocess.TimeoutExpired:
        return DetectGpusResult(gpus=[], note=f"{binary} did not answer in 30 s")
    if out.returncode != 0:
        first = (out.stderr or out.stdout).strip().splitlines()[:1]
        return DetectGpusResult(gpus=[], note=f"{binary} failed (exit {out.returncode}): {' '.join(first)}")
    gpus = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        memory = int(float(parts[2])) if parts[2].replace(".", "", 1).isdigit() else 0
        gpus.append(GpuInfo(index=int(parts[0]), name=parts[1], memory_mib=memory))
    if args.only is not None:
        missing = sorted(set(args.only) - {g.index for g in gpus})
        if missing:
            return DetectGpusResult(gpus=[], note=f"GPU index {missing} not present (found {[g.index for g in gpus]})")
        gpus = [g for g in gpus if g.index in args.only]
    return DetectGpusResult(gpus=gpus, note="" if gpus else "nvidia-smi listed no GPUs")


DETECT_GPUS = Tool(name="detect_gpus", args=DetectGpusArgs, run=detect_gpus)
