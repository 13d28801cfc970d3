"""Read tuning progress out of a job's log: our driver's unit lines, the real script's
per-shape lines ("Writing best config to ...") and its tqdm bars (carriage-return separated)."""
from __future__ import annotations

import re

from pydantic import BaseModel

from tools.tuning.configs import parse_config_file_name

_UNIT = re.compile(r"\[dsv4-agent\] unit (?:done|skipped) N=(\d+) K=(\d+) M=(\d+)")
_WRITING = re.compile(r"Writing best config to (.+?\.json)")
_SHAPE = re.compile(r"Tune for weight shape of `N: (\d+), K: (\d+)`")
_BAR = re.compile(r"([^\r\n|]*?):\s*(\d+)%\|[^|]*\|\s*(\d+)/(\d+)")


class TuningProgress(BaseModel):
    done_units: list[str]  # unit ids "N{n}-K{k}-M{m}"
    current_shape: str = ""
    bar: str = ""  # the last tqdm bar seen, e.g. "GPU 0 - Batch sizes 9/18"
    finished: bool = False


def parse_progress(log: str, units_by_shape: dict[tuple[int, int], list[int]] | None = None) -> TuningProgress:
    """Units finished according to the log. ``units_by_shape`` ((N,K) -> Ms of this job) lets a
    "Writing best config" line of the real script count all of that shape's units as done."""
    done: dict[str, None] = {}
    for n, k, m in _UNIT.findall(log):
        done[f"N{n}-K{k}-M{m}"] = None
    for path in _WRITING.findall(log):
        parsed = parse_config_file_name(path)
        if parsed and units_by_shape:
            for m in units_by_shape.get((parsed["n"], parsed["k"]), []):
                done[f"N{parsed['n']}-K{parsed['k']}-M{m}"] = None
    shapes = _SHAPE.findall(log)
    bars = _BAR.findall(log)
    bar = f"{bars[-1][0].strip()} {bars[-1][2]}/{bars[-1][3]}" if bars else ""
    return TuningProgress(done_units=list(done), current_shape=f"N={shapes[-1][0]} K={shapes[-1][1]}" if shapes else "",
                          bar=bar, finished="[dsv4-agent] all units done" in log or "Multi-GPU tuning completed" in log)
