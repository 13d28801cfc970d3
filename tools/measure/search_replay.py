"""Re-derives a search's recorded decisions offline, from the run folder alone (``dsv4-agent replay``).

Every ``search_drop``, ``search_repeat`` and ``search_budget`` event of the trace is worked out again with
the functions that made it (tools/measure/search_rules.py, tools/measure/search_budget.py), from the
run's ``bench/*.jsonl`` and ``measure_plan.json`` and the figures the event carries: the same candidates
dropped on the same numbers, each survivor at the same rank, each estimate the same sum. A difference
is a problem, named with the event's sequence number.
"""
from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from tools.measure.decision import bench_records
from tools.measure.search_budget import Costs, estimate
from tools.measure.search_rules import first_look_drops, survivors

KINDS = ("search_drop", "search_repeat", "search_budget")


class SearchCheck(BaseModel):
    checked: int = 0
    problems: list[str] = Field(default_factory=list)

    def text(self) -> str:
        if self.problems:
            return f"search: {len(self.problems)} of {self.checked} decisions differ: {self.problems[0]}"
        return f"search: all {self.checked} decisions (drops, extra repeats, re-estimates) re-derived the same"


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 0.05 + 1e-3 * max(abs(a), abs(b))


def _budget_problem(event: dict, levels: list[int], repeats: int) -> str | None:
    costs = Costs(start_s=[event["server_start_s"]],
                  run_s={int(c): [s] for c, s in event["repeat_s"].items()})
    looks, extras = int(event.get("first_looks", 0)), int(event.get("extra_repeats_for", 0))
    work = estimate(costs, looks, {c: looks for c in levels}) + \
        estimate(costs, extras, {c: extras * (repeats - 1) for c in levels})
    if not _close(work, event["estimate_s"]):
        return f"the estimate re-derives as {work:.3f}s, recorded {event['estimate_s']:.3f}s"
    if not _close(event["budget_s"] - event["spent_s"], event["left_s"]):
        return "the budget left is not budget - spent"
    return None


def check_search(run_dir: Path, events: list[dict]) -> SearchCheck | None:
    """None when the run made no search decision."""
    mine = [e for e in events if e.get("type") in KINDS]
    if not mine:
        return None
    out = SearchCheck()
    try:
        plan = json.loads((run_dir / "measure_plan.json").read_text())
        names, levels, repeats = [v["name"] for v in plan["variants"]], list(plan["concurrency"]), plan["repeats"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        return SearchCheck(checked=len(mine), problems=[f"measure_plan.json cannot be read: {err}"])
    records, _ = bench_records(run_dir / "bench")
    drops = first_look_drops(records, names, levels)
    order = survivors(records, names, set(drops))
    for event in mine:
        out.checked += 1
        where = f"event #{event.get('seq')} ({event['type']}"
        problem = None
        if event["type"] == "search_drop":
            again = drops.get(event["variant"])
            recorded = {int(c): lv for c, lv in event["levels"].items()}
            if again is None:
                problem = f"{event['variant']} is not dropped by the first look on disk"
            elif {c: e.model_dump() for c, e in again.levels.items()} != recorded:
                problem = f"{event['variant']}'s numbers differ from the first look on disk"
        elif event["type"] == "search_repeat":
            rank = int(event["rank"])
            if rank > len(order) or order[rank - 1] != event["variant"]:
                problem = f"{event['variant']} at rank {rank}; the first look ranks {', '.join(order)}"
        else:
            problem = _budget_problem(event, levels, repeats)
        if problem:
            out.problems.append(f"{where}, {event.get('variant', event.get('why', ''))}): {problem}")
    missing = sorted(set(drops) - {e["variant"] for e in mine if e["type"] == "search_drop"})
    if missing and any(e["type"] == "search_repeat" for e in mine):  # drops are decided before any repeat
        out.problems.append(f"the first look on disk drops {', '.join(missing)}, which no search_drop records")
    return out
