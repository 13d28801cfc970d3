"""The campaign's ETA in the live view: what is left of the GPU work, from the plan and the rates seen.

The GPU lane runs its work in order: the tuning jobs (one per GPU, side by side), then per variant
of ``measure_plan.json`` a server boot, its benchmark points and, when the plan gates accuracy,
SGLang's GSM8K check. What is left is the slowest tuning job's ETA plus, for every variant not yet
done, the boot, the points and the check still to come, each at the mean time those took so far
in this run. A part with no example yet (no server has booted, no point has finished) has no
time: the ETA then counts what is known and says which part is still untimed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean


@dataclass
class _Variant:
    points: int = 0            # in the plan
    done: int = 0              # measured (or failed) so far, a run before this one's included
    launched_at: float | None = None
    ready: bool = False
    finished: bool = False     # its server stopped: nothing left for it
    checked: bool = False      # its accuracy check ended


@dataclass
class CampaignEta:
    variants: dict[str, _Variant] = field(default_factory=dict)
    accuracy: bool = False
    planned: bool = False      # measure_plan.json was read
    gpu_work: bool | None = None  # the run starts GPU jobs and measures (None: not known yet)
    benchmark_over: bool = False
    boots: list[float] = field(default_factory=list)
    point_times: list[float] = field(default_factory=list)
    checks: list[float] = field(default_factory=list)
    _started: dict[str, float] = field(default_factory=dict)  # job key -> launch time (points, checks)

    def read_plan(self, run_path: Path | None) -> None:
        """Whether this run does GPU work (preflight found GPUs, no --plan-only, a benchmark in plan.json),
        and the variants and their points from measure_plan.json once it exists (write_scripts writes it)."""
        if self.planned or run_path is None:
            return
        folder = Path(run_path)
        if self.gpu_work is None:
            self.gpu_work = _gpu_work(folder)
        if not self.gpu_work:
            return
        try:
            plan = json.loads((folder / "measure_plan.json").read_text())
            points = len(plan["concurrency"]) * int(plan.get("repeats") or 1)
            names = [v["name"] for v in plan["variants"]]
        except (OSError, ValueError, KeyError, TypeError):
            return  # not written yet (or being written): read again at the next redraw
        accuracy = plan.get("accuracy") or {}
        self.accuracy = bool(accuracy) and not accuracy.get("skip_reason")
        for name in names:
            self.variants.setdefault(name, _Variant()).points = points
        self.planned = True

    def on_event(self, kind: str, event: dict, now: float) -> None:
        name, key = event.get("variant"), str(event.get("key") or "")
        variant = self.variants.setdefault(name, _Variant()) if name else None
        job = event.get("kind")
        if kind == "progress" and variant is not None and "points" in event:
            variant.points, variant.done = int(event["points"]), int(event.get("measured") or 0)
        elif kind == "progress" and event.get("ready") and variant is not None:
            variant.ready = True
            if key in self._started:
                self.boots.append(now - self._started.pop(key))
        elif kind == "job_launched" and job in ("serve", "bench", "accuracy"):
            self._started.setdefault(key, now)
            if job == "serve" and variant is not None:
                variant.launched_at = variant.launched_at or now
        elif kind == "job_finished" and job == "bench" and variant is not None:
            variant.done += 1
            if key in self._started:
                self.point_times.append(now - self._started.pop(key))
        elif kind == "job_finished" and job == "accuracy" and variant is not None:
            variant.checked = True
            if key in self._started:
                self.checks.append(now - self._started.pop(key))
        elif kind == "job_finished" and job == "serve" and variant is not None:
            variant.finished = True
        elif kind == "tool_result" and event.get("tool") == "benchmark":
            self.benchmark_over = True

    def left(self, tuning: list[float | None], now: float) -> tuple[float, list[str]]:
        """Seconds of GPU work known to be left, and the parts with no time yet (``tuning`` holds
        each running tuning job's ETA, None when it has no rate yet)."""
        untimed: list[str] = []
        known = max((t for t in tuning if t is not None), default=0.0)
        if any(t is None for t in tuning):
            untimed.append("tuning")
        if self.gpu_work is False or self.benchmark_over:
            return known, untimed
        if not self.planned and not self.variants:
            return known, untimed + ["benchmark (not planned yet)"]
        parts = {"server boot": self.boots, "bench point": self.point_times, "accuracy check": self.checks}
        for variant in self.variants.values():
            if variant.finished or (variant.done >= variant.points and not variant.launched_at):
                continue
            todo = {"server boot": 0.0 if variant.ready else 1.0,
                    "bench point": float(max(0, variant.points - variant.done)),
                    "accuracy check": 1.0 if self.accuracy and not variant.checked else 0.0}
            for part, count in todo.items():
                if count and parts[part]:
                    took = mean(parts[part]) * count
                    if part == "server boot" and variant.launched_at is not None:
                        took = max(0.0, took - (now - variant.launched_at))  # booting now
                    known += took
                elif count and part not in untimed:
                    untimed.append(part)
        return known, untimed


def _gpu_work(folder: Path) -> bool | None:
    """False when the run measures nothing here: no GPU, --plan-only, or no benchmark step in plan.json."""
    try:
        gpus = json.loads((folder / "preflight.json").read_text()).get("gpus")
        plan_only = json.loads((folder / "config.json").read_text()).get("settings", {}).get("plan_only")
        steps = [step.get("kind") for step in json.loads((folder / "plan.json").read_text())]
    except (OSError, ValueError, AttributeError):
        return None  # not all written yet: asked again at the next redraw
    return bool(gpus) and not plan_only and "benchmark" in steps
