"""The verdict of a measured run folder: records from ``bench/<variant>.jsonl``, the accuracy gate from
``bench/accuracy/``, the SLOs the user gave. Used by the benchmark step (``verdict.json``) and by
``dsv4-agent report`` for a folder measured by ``run_measure.sh``."""
from __future__ import annotations

import shlex
from pathlib import Path

from tools.measure.accuracy import AccuracyPlan, GateResult, gate, gate_status, load_results
from tools.measure.results import BenchRecord, parse_jsonl
from tools.measure.verdict import Slo, Verdict, decide
from tools.scripts.models import MeasurePlan, ServeVariant

VERDICT_FILE = "verdict.json"


def bench_records(results_dir: Path) -> tuple[list[BenchRecord], list[str]]:
    records: list[BenchRecord] = []
    problems: list[str] = []
    for path in sorted(results_dir.glob("*.jsonl")):
        if path.name.endswith(".failures.jsonl"):
            continue  # snapshots/<variant>.jsonl is in a subfolder: the glob never sees it
        parsed = parse_jsonl(path)
        records += parsed.records
        problems += parsed.problems
    return records, problems


def gates_of(results_dir: Path, plan: AccuracyPlan | None, variants: list[str]) -> dict[str, GateResult]:
    if plan is None:
        return {}
    found = load_results(results_dir)
    if plan.skip_reason:
        return gate({v: None for v in variants}, plan)  # type: ignore[arg-type]  # every variant: not checked
    return gate(found, plan)


def _spec(variant: ServeVariant) -> tuple[str | None, int | None]:
    flags = {f.flag: f.value for f in variant.flags}
    steps = flags.get("--speculative-num-steps")
    return flags.get("--speculative-algorithm"), int(steps) if steps and steps.isdigit() else None


def decide_folder(results_dir: Path, plan: MeasurePlan | None, slo: Slo | None,
                  target: int | None = None) -> Verdict | None:
    """The verdict of what is on disk now (a removed baseline file gives no ratio); ``dsv4-agent resume``
    of this run folder measures what is missing."""
    records, _problems = bench_records(results_dir)
    if not records:
        return None
    accuracy = plan.accuracy if plan else None
    run = shlex.quote(str(results_dir.parent))
    return decide(records, gates_of(results_dir, accuracy, sorted({r.variant for r in records})), slo, target,
                  resume=f"dsv4-agent resume {run}", specs={v.name: _spec(v) for v in plan.variants} if plan else {},
                  floors=plan.accept_floors if plan else [], accuracy=gate_status(accuracy) if plan else "")
