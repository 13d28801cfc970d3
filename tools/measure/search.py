"""A measured search of the fenced space under a GPU-time budget: successive halving over the sweep.

1. **First look**: every candidate gets one repeat per concurrency on its own server
   (tools/measure/bench.py ``run_sweep`` on a one-variant, one-repeat plan; no accuracy check). The
   baseline comes first and, being the reference that is never dropped, gets every repeat on that one
   server when the budget covers them (a server start saved); its points price a server start and a
   repeat at each concurrency on this host (tools/measure/search_budget.py), and the plan is
   re-estimated (``search_budget`` event).
2. **Drops**: candidates measurably worse than the best at every level are dropped
   (tools/measure/search_rules.py; ``search_drop`` events with the numbers that decided each).
3. **Extra repeats**: the survivors, baseline first then the most promising, get the remaining repeats and
   the accuracy check, each while the budget left covers its estimate (``search_repeat``); what does not
   fit is listed in ``not_measured`` and the verdict says so.

Every decision is written to ``bench/search.json`` as it is made, so a resumed search keeps its drops and
its spent time; finished points are never measured again (the sweep skips them).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from tools.jobs import Executor
from tools.measure.bench import SweepResult, finished_points, run_sweep
from tools.measure.decision import bench_records
from tools.measure.search_budget import Costs, duration_text, estimate
from tools.measure.search_rules import Drop, first_look_drops, survivors
from tools.scripts.models import MeasurePlan, ServeVariant

SEARCH_FILE = "search.json"
BASELINE = "baseline"
EventSink = Callable[[str, dict], None]


class SearchState(BaseModel):
    """``bench/search.json``: every decision of the search, written as it is made."""

    budget_s: float
    repeats: int
    spent_s: float = 0.0
    costs: Costs = Field(default_factory=Costs)
    drops: dict[str, Drop] = Field(default_factory=dict)
    extra: list[str] = Field(default_factory=list, description="Survivors granted the remaining repeats, in order")
    not_measured: list[str] = Field(default_factory=list, description="What the budget left out, and why")
    no_look: list[str] = Field(default_factory=list, description="Candidates the budget left without a first look")

    def unmeasured_text(self) -> str:
        return "; ".join(self.not_measured)


class _Clock:
    """Spent time across attempts, and the costs seen in this one (from the sweep's own events)."""

    def __init__(self, state: SearchState, path: Path, emit: EventSink):
        self.state, self.path, self.emit = state, path, emit
        self.since = time.monotonic()
        self.started: dict[str, tuple[float, int | None]] = {}

    def spent(self) -> float:
        return self.state.spent_s + time.monotonic() - self.since

    def save(self) -> None:
        self.state.spent_s, self.since = self.spent(), time.monotonic()
        self.path.write_text(self.state.model_dump_json(indent=2))

    def on_event(self, kind: str, data: dict) -> None:
        key, now = str(data.get("key") or ""), time.monotonic()
        if kind == "job_launched" and data.get("kind") in ("serve", "bench"):
            self.started.setdefault(key, (now, data.get("concurrency")))
        elif kind == "progress" and data.get("ready") and key in self.started:
            self.state.costs.start_s.append(now - self.started.pop(key)[0])
        elif kind == "job_finished" and data.get("kind") == "bench" and key in self.started:
            began, conc = self.started.pop(key)
            if data.get("status") == "succeeded" and conc is not None:
                self.state.costs.run_s.setdefault(int(conc), []).append(now - began)
        self.emit(kind, data)


def _load(path: Path, budget_s: float, repeats: int) -> SearchState:
    if path.exists():
        try:
            found = SearchState.model_validate_json(path.read_text())  # this attempt decides anew what fits
            return found.model_copy(update={"budget_s": budget_s, "not_measured": [], "no_look": []})
        except ValueError:
            pass  # a torn file: the decisions are re-derived from the results (tools/measure/search_rules.py)
    return SearchState(budget_s=budget_s, repeats=repeats)


def _merge(into: SweepResult, part: SweepResult) -> None:
    into.results.update(part.results)
    into.server_logs.update(part.server_logs)
    into.done += part.done
    into.skipped += part.skipped
    into.failures += part.failures


def _cost(clock: _Clock, plan: MeasurePlan, repeats: int) -> float:
    return estimate(clock.state.costs, 1, {c: repeats for c in plan.concurrency})


def _reestimate(clock: _Clock, plan: MeasurePlan, looks: int, extras: int, why: str) -> None:
    """The work left priced at the costs seen: ``looks`` first looks, ``extras`` survivors' remaining repeats."""
    costs, k = clock.state.costs, plan.repeats
    work = estimate(costs, looks, {c: looks for c in plan.concurrency}) + \
        estimate(costs, extras, {c: extras * (k - 1) for c in plan.concurrency})
    left = clock.state.budget_s - clock.spent()
    line = (f"{duration_text(clock.spent())} of {duration_text(clock.state.budget_s)} spent, "
            f"{duration_text(max(left, 0))} left; the work left is estimated at {duration_text(work)} ({why})")
    clock.emit("search_budget", {"why": why, "budget_s": clock.state.budget_s, "spent_s": round(clock.spent(), 3),
                                 "left_s": round(left, 3), "estimate_s": round(work, 3), "first_looks": looks,
                                 "extra_repeats_for": extras, **costs.summary(), "key": "search", "message": line})
    clock.emit("progress", {"message": f"search: {line}"})  # the live view's lane row


def _measure(executor: Executor, plan: MeasurePlan, variant: ServeVariant, repeats: int, accuracy: bool,
             clock: _Clock, results_dir: Path, python: str, env: dict | None, out: SweepResult) -> None:
    part_plan = plan.model_copy(update={"variants": [variant], "repeats": repeats,
                                        "accuracy": plan.accuracy if accuracy else None})
    _merge(out, run_sweep(executor, part_plan, python, results_dir, env=env, on_event=clock.on_event))
    clock.save()


def run_search(executor: Executor, plan: MeasurePlan, python: str, results_dir: Path, budget_s: float,
               env: dict[str, str] | None = None, on_event: EventSink | None = None) -> tuple[SweepResult, SearchState]:
    """Blocking: the search of ``plan.variants`` (the fenced space and the baseline) within ``budget_s``."""
    results_dir.mkdir(parents=True, exist_ok=True)
    emit = on_event or (lambda _type, _data: None)
    clock = _Clock(_load(results_dir / SEARCH_FILE, budget_s, plan.repeats), results_dir / SEARCH_FILE, emit)
    state, out = clock.state, SweepResult()
    ordered = sorted(plan.variants, key=lambda v: v.name != BASELINE)
    for number, variant in enumerate(ordered):
        looked = {p.tag(variant.name) for p in plan.model_copy(update={"repeats": 1}).points()} <= \
            finished_points(results_dir / f"{variant.name}.jsonl", variant.name)
        # the budget was checked against one server start: the baseline always gets its look
        if not looked and number > 0 and clock.spent() + _cost(clock, plan, 1) > budget_s:
            state.no_look.append(variant.name)
            state.not_measured.append(f"{variant.name}: no first look (the budget left, "
                                      f"{duration_text(budget_s - clock.spent())}, is less than its estimate)")
            continue
        # The baseline is the reference, never dropped: its server measures every repeat at once (one start less)
        full = variant.name == BASELINE and _grant(clock, plan, BASELINE, 1)
        _measure(executor, plan, variant, plan.repeats if full else 1, full, clock, results_dir, python, env, out)
        if number == 0 and state.costs.known():  # the first points price this host: re-estimate the plan
            _reestimate(clock, plan, len(ordered) - 1, 1, "the baseline's points priced a server start and a repeat")
    records, _ = bench_records(results_dir)
    names = [v.name for v in plan.variants]
    for name, drop in first_look_drops(records, names, list(plan.concurrency)).items():
        if name not in state.drops:
            state.drops[name] = drop
            emit("search_drop", {"variant": name, "levels": {str(c): e.model_dump() for c, e in drop.levels.items()},
                                 "key": name, "message": f"dropped: measurably worse than the best at every level: "
                                                         f"{drop.text()}"})
    clock.save()
    _extra_repeats(executor, plan, clock, results_dir, python, env, out, survivors(records, names, set(state.drops)))
    return out, state


def _extra_repeats(executor: Executor, plan: MeasurePlan, clock: _Clock, results_dir: Path, python: str,
                   env: dict | None, out: SweepResult, order: list[str]) -> None:
    state, by_name = clock.state, {v.name: v for v in plan.variants}
    waiting = sum(n not in state.extra for n in order)
    _reestimate(clock, plan, 0, waiting, f"{len(state.drops)} dropped after the first look")
    for name in (n for n in order if n not in state.no_look):
        if _grant(clock, plan, name, order.index(name) + 1):
            _measure(executor, plan, by_name[name], plan.repeats, True, clock, results_dir, python, env, out)


def _grant(clock: _Clock, plan: MeasurePlan, name: str, rank: int) -> bool:
    """Whether ``name`` gets every repeat: granted before (a resumed search keeps it), or its estimate fits the
    budget left (a ``search_repeat`` event); else it is named in ``not_measured``."""
    state = clock.state
    if name in state.extra:
        return True
    cost, left = _cost(clock, plan, plan.repeats - 1), state.budget_s - clock.spent()
    more = f"{plan.repeats - 1} more repeat(s) per concurrency"
    if cost > left:
        state.not_measured.append(f"{name}: {more} (estimated {duration_text(cost)}, "
                                  f"{duration_text(max(left, 0))} left)")
        clock.save()
        return False
    state.extra.append(name)
    clock.emit("search_repeat", {"variant": name, "repeats": plan.repeats, "estimate_s": round(cost, 3),
                                 "left_s": round(left, 3), "rank": rank, "key": name, "message":
                                 f"{more} (estimated {duration_text(cost)}, {duration_text(max(left, 0))} left)"})
    clock.save()
    return True
