"""GPUs of a host we reach through an executor: parse what its ``nvidia-smi`` or Slurm answers."""
from __future__ import annotations

import re

from tools.gpus import GpuInfo

_GRES_GPU = re.compile(r"(?:^|,)gpu(?::([A-Za-z0-9_.-]+))?:(\d+)")


def parse_nvidia_smi(stdout: str) -> list[GpuInfo]:
    """Lines of ``nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits``."""
    gpus = []
    for line in stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        memory = int(float(parts[2])) if parts[2].replace(".", "", 1).isdigit() else 0
        gpus.append(GpuInfo(index=int(parts[0]), name=parts[1], memory_mib=memory))
    return gpus


def parse_slurm_gres(lines: str) -> tuple[int, str | None]:
    """(GPUs per node, gres type or None) of the best node type in ``sinfo -h -o %G`` output.

    Forms: ``gpu:2``, ``gpu:h100:8(S:0-1)``, ``gpu:a100:4,shard:8``; ``(null)`` when no gres.
    """
    best, kind = 0, None
    for line in lines.splitlines():
        for match in _GRES_GPU.finditer(line.strip()):
            count = int(match.group(2))
            if count > best:
                best, kind = count, match.group(1)
    return best, kind
