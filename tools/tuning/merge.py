"""Merge the per-process tuning outputs into one file per (N, K, device, block) and validate them.

Each GPU process wrote into its own folder (``out/gpu<i>/``), so no process overwrote another's
file; here the maps for the same file name are joined. Two processes tuning the same M would be
a planning bug, and conflicting values are reported rather than silently picked.
"""
from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import ToolError
from tools.tuning.configs import parse_config_file_name, read_config_file


class MergedFile(BaseModel):
    name: str
    path: str = Field(description="Merged file, written under the merge folder")
    sources: list[str]
    batch_sizes: list[int]


class MergeResult(BaseModel):
    files: list[MergedFile]
    missing_units: list[str] = Field(default_factory=list, description="Planned unit ids with no result")


def merge_outputs(out_root: Path, merged_dir: Path, expected_units: list[str] | None = None) -> MergeResult:
    """Join ``out_root/*/<config>.json`` per file name into ``merged_dir``; validate everything first."""
    by_name: dict[str, list[Path]] = {}
    for path in sorted(Path(out_root).glob("*/*.json")):
        if parse_config_file_name(path.name) is None:
            continue
        by_name.setdefault(path.name, []).append(path)
    merged: dict[str, dict[int, dict]] = {}
    for name, paths in by_name.items():
        joined: dict[int, dict] = {}
        for path in paths:
            for m, config in read_config_file(path).items():  # raises a clear ToolError if corrupt
                if m in joined and joined[m] != config:
                    raise ToolError(f"{name}: M={m} was tuned by two processes with different results "
                                    f"({', '.join(str(p.parent.name) for p in paths)}); delete one folder "
                                    "under tuning/out and re-run the tuning step")
                joined[m] = config
        merged[name] = joined
    done = {f"N{p['n']}-K{p['k']}-M{m}" for name, maps in merged.items()
            for p in [parse_config_file_name(name)] for m in maps}
    missing = [u for u in (expected_units or []) if u not in done]
    merged_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for name, joined in sorted(merged.items()):
        target = merged_dir / name
        tmp = target.with_name(f".{name}.tmp")
        tmp.write_text(json.dumps({str(m): joined[m] for m in sorted(joined)}, indent=4) + "\n")
        tmp.replace(target)
        files.append(MergedFile(name=name, path=str(target), sources=[str(p) for p in by_name[name]],
                                batch_sizes=sorted(joined)))
    return MergeResult(files=files, missing_units=missing)
