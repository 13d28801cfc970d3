"""GPUs of a Slurm partition: parse what ``sinfo`` answers (an SSH host's ``nvidia-smi`` answers are
parsed by ``tools/gpus.py``, like this machine's)."""
from __future__ import annotations

import re

_GRES_GPU = re.compile(r"(?:^|,)gpu(?::([A-Za-z0-9_.-]+))?:(\d+)")


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
