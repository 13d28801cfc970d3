"""Tensor names from a checkpoint's ``model.safetensors.index.json``: names only, never weights.

The index maps each tensor name to the shard file holding it. A real one is a few MB (DeepSeek-V4-Pro
lists tens of thousands of tensors); a file far larger, one that is not a JSON object with a
``weight_map`` of names to file names, or names that are not printable, is not trusted: the reader says
why in one line and the caller treats every fact that needed the names as undecided.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tools.source.confine import read_bounded

INDEX_NAME = "model.safetensors.index.json"
MAX_INDEX_BYTES = 64 * 1024 * 1024
MAX_NAME_CHARS = 512


@dataclass(frozen=True)
class TensorIndex:
    path: str
    names: frozenset[str]
    missing_shards: int  # shard files the index names that are not in the folder (an incomplete download)

    def holding(self, module: str) -> list[str]:
        """Tensor names with ``module`` as one of their dotted parts (``mtp.0.e_proj.weight`` holds e_proj)."""
        return sorted(n for n in self.names if module in n.split("."))


def read_index(folder: Path) -> tuple[TensorIndex | None, str]:
    """(the index, '') or (None, why there is none or why it is not trusted)."""
    path = folder / INDEX_NAME
    if not path.exists():
        return None, f"no {INDEX_NAME} in {folder}"
    try:
        data = json.loads(read_bounded(path, MAX_INDEX_BYTES))
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors too
        return None, f"{path} is not usable ({str(err).splitlines()[0][:120]}): tensor names not read"
    except RecursionError:
        return None, f"{path} is nested too deeply to be an index: tensor names not read"
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        return None, f"{path} has no weight_map of tensor names: tensor names not read"
    bad = [k for k, v in weight_map.items() if not isinstance(v, str) or len(k) > MAX_NAME_CHARS
           or not k.isprintable() or not v.isprintable() or "/" in v or v.startswith(".")]
    if bad:
        return None, f"{path} lists {len(bad)} entries that are not tensor name -> shard file: tensor names not trusted"
    shards = set(weight_map.values())
    missing = sum(1 for s in shards if not (folder / s).exists())
    return TensorIndex(path=str(path), names=frozenset(weight_map), missing_shards=missing), ""
