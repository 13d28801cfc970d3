"""Tuning rounds: which GPU tunes which units, kept across resumes on other GPUs.

A round is one assignment of units to GPUs (``tuning/round.json``, written before its jobs start).
A resume with the same GPUs goes on with the round: its jobs are re-attached and their drivers skip
the units already saved. A resume with other GPUs (fewer, more, overlapping) starts the next round:
the earlier round's jobs that still run are stopped (they are ours, and their GPUs may no longer be
ours to use), every unit already saved under ``tuning/out/`` is kept, and the units left are planned
over the GPUs given now. Round 1's jobs are ``tune-gpu<i>``, round n's ``tune-r<n>-gpu<i>``, so no
job of one round is ever taken for a job of another.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tools.base import ToolError
from tools.jobs import Executor
from tools.tuning.configs import parse_config_file_name
from tools.tuning.plan import GpuWork, TuningPlan, Unit, lower_bound, plan_units

ROUND_FILE = "round.json"


def round_key(number: int, gpu: int) -> str:
    return f"tune-gpu{gpu}" if number == 1 else f"tune-r{number}-gpu{gpu}"


@dataclass
class TuningRound:
    number: int
    plan: TuningPlan
    note: str = ""          # what changed since the last round, for the trace ('' when nothing did)
    kept: int = 0           # units already saved, not tuned again


def saved_units(out_root: Path) -> set[str]:
    """Ids of the units some job already saved under ``out_root/<gpu folder>/`` (any round)."""
    done: set[str] = set()
    for path in sorted(Path(out_root).glob("*/*.json")):
        shape = parse_config_file_name(path.name)
        if shape is None:
            continue
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # cut short by a kill: its units are not saved
        if isinstance(saved, dict):
            done |= {f"N{shape['n']}-K{shape['k']}-M{m}" for m in saved if str(m).isdigit()}
    return done


def _plan_of(per_gpu: list[GpuWork]) -> TuningPlan:
    costs = [u.cost for w in per_gpu for u in w.units]
    return TuningPlan(per_gpu=per_gpu, total_units=len(costs), makespan=max((w.est_cost for w in per_gpu), default=0.0),
                      lower_bound=lower_bound(costs, max(1, len(per_gpu))) if costs else 0.0)


def _recorded(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("units"), dict) else None


def _write(path: Path, number: int, gpus: list[int], plan: TuningPlan) -> None:
    data = {"round": number, "gpus": list(gpus),
            "units": {str(w.gpu): [u.id for u in w.units] for w in plan.per_gpu}}
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def choose_round(executor: Executor, tuning_dir: Path, units: list[Unit], gpus: list[int],
                 stop: Callable[[str], object]) -> TuningRound:
    """The round to run on ``gpus`` now (see the module); ``stop(key)`` stops a job of an earlier round."""
    path = tuning_dir / ROUND_FILE
    recorded = _recorded(path)
    by_id = {u.id: u for u in units}
    if recorded is None:
        plan = plan_units(units, gpus)
        _write(path, 1, gpus, plan)
        return TuningRound(1, plan)
    number = int(recorded.get("round", 1))
    assigned = {int(g): ids for g, ids in recorded["units"].items()}
    given = recorded.get("gpus") or sorted(assigned)
    everything = {uid for ids in assigned.values() for uid in ids}
    left = [u for u in units if u.id not in saved_units(tuning_dir / "out")]
    if sorted(given) == sorted(gpus) and {u.id for u in left} <= everything <= set(by_id):
        per_gpu = [GpuWork(gpu=g, units=[by_id[i] for i in ids], est_cost=sum(by_id[i].cost for i in ids))
                   for g, ids in assigned.items()]
        return TuningRound(number, _plan_of(per_gpu))
    stopped = []
    for state in executor.jobs():
        if state.kind == "tune" and not state.done:
            try:
                stop(state.key)
            except ToolError as err:
                raise ToolError(f"the tuning jobs ran on GPUs {given} and the GPUs now are {gpus}, but "
                                f"{state.key} could not be stopped to hand its units on: {err}") from None
            stopped.append(state.key)
    done = saved_units(tuning_dir / "out")  # what the stopped jobs finished meanwhile is kept too
    left = [u for u in units if u.id not in done]
    plan = _plan_of([w for w in plan_units(left, gpus).per_gpu if w.units]) if left else _plan_of([])
    _write(path, number + 1, gpus, plan)
    note = (f"the tuning ran on GPUs {given}; now GPUs {gpus}: {len(units) - len(left)} units already "
            f"tuned are kept, {len(left)} are planned over GPUs {gpus}"
            + (f" (stopped {', '.join(stopped)} to hand their units on)" if stopped else ""))
    return TuningRound(number + 1, plan, note=note, kept=len(units) - len(left))
