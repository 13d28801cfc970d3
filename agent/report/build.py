"""The campaign report, rebuilt from the run folder alone: ``report.md``, ``report.html``, plots,
``results.csv`` and ``results.json``.

The page opens with the verdict, so a reader sees the decision first, then the header (model, GPU,
TP, SGLang version, the architecture and how preflight decided it, lengths, prompts, date). ``report.html`` is self-contained (plots are data URIs)
and reads on a phone: wide tables scroll in their own box, images scale to the page.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable, Iterable

from tools import json_data
from agent.report.blocks import Image, Para, Section, embed_images, images_in
from agent.report.measurement import (
    accuracy_section, comparison_section, metrics_section, results_files, verdict_section,
)
from agent.report.page import render
from agent.report import sections as parts
from agent.report.configs_in_place import configs_in_place_section
from agent.run.folder import read_result
from agent.run.run_files import CONFIG, RESULT, RunFiles, RunFolderError
from tools.measure.accuracy import load_results as load_accuracy
from tools.measure.decision import bench_records, decide_folder, gates_of
from tools.measure.results import BenchRecord
from tools.checkpoint.architecture import Architecture
from tools.mtp.variants import setting_label
from tools.measure.verdict import PointStats, Slo, Verdict, point_stats
from tools.scripts.models import MeasurePlan
from tools.tuning.prove import prove_run
from agent.secrets import redact_text
from agent.terminal.printable import printable


def _finished_at(run: RunFiles) -> float | None:
    """When the run finished; None before result.json (or with a damaged one: ``report`` says so,
    agent/commands/report.py, and the date comes from config.json)."""
    try:
        return (read_result(run.path / RESULT) or {}).get("finished_at")
    except RunFolderError:
        return None


def load_results(run_dir: Path) -> tuple[list[BenchRecord], list[str], list[dict]]:
    """Every measured run, parse problems, and failures of points that never produced a result."""
    bench = run_dir / "bench"
    records, problems = bench_records(bench)
    measured = {(r.variant, r.concurrency) for r in records}
    latest: dict[tuple, dict] = {}
    for path in sorted(bench.glob("*.failures.jsonl")):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            try:
                item = json_data.loads(line)
            except json.JSONDecodeError:
                problems.append(f"{path.name}:{number}: not JSON; line skipped")
                continue
            key = (item.get("variant"), item.get("concurrency"))
            if key not in measured:  # a later retry that succeeded wins over the failure
                latest[key] = item
    return records, problems, list(latest.values())


def _plan(run_dir: Path) -> MeasurePlan | None:
    return RunFiles(run_dir).measure_plan()


def _slo(settings: dict) -> Slo | None:
    slo = Slo(max_ttft_ms=settings.get("max_ttft_ms"), max_tpot_ms=settings.get("max_tpot_ms"),
              percentile=settings.get("slo_percentile") or "p99")
    return slo if slo.given else None


def _verdict(run_dir: Path, plan: MeasurePlan | None, settings: dict) -> Verdict | None:
    """Recomputed from what is on disk now, never the recorded verdict.json: a removed or added result
    file changes the verdict (a removed baseline gives no ratio)."""
    return decide_folder(run_dir / "bench", plan, _slo(settings), settings.get("target_concurrency"))


def header(run_dir: Path, plan: MeasurePlan | None) -> list[tuple[str, str]]:
    run = RunFiles(run_dir)
    config = run.config() or {}
    settings = config.get("settings", {})
    pre = run.preflight() or {}
    gpus = pre.get("gpus") or []
    names = sorted({g.get("name", "?") for g in gpus})
    source = pre.get("sglang_source") or {}
    when = _finished_at(run) or (run_dir / CONFIG).stat().st_mtime if (run_dir / CONFIG).exists() else time.time()
    model, path = settings.get("model"), settings.get("model_path")
    rows = [("model", model or path or "?")]
    rows += [("model path", path)] if path and path != model else []
    rows += [("GPU", f"{len(gpus)} × {', '.join(names)}" if gpus else "none here (planned for a GPU host)"),
             ("TP", str(plan.variants[0].tp) if plan else str(settings.get("tp") or "?")),
             ("SGLang", f"{source.get('version') or '?'} ({source.get('kind', '?')}"
                        + (f", commit {source['commit'][:12]}" if source.get("commit") else "") + ")"),
             ("goal", str(config.get("goal", "?")))]
    rows += _architecture(pre)
    if plan:
        rows += [("lengths", f"input {plan.input_len} / output {plan.output_len} tokens (random ids)"),
                 ("prompts", f"{plan.prompts_per_concurrency} per concurrency slot, at least {plan.min_prompts}; "
                             f"concurrency {' '.join(map(str, plan.concurrency))}; {plan.repeats} repeat(s)")]
    return rows + [("date", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(when)))]


def _architecture(pre: dict) -> list[tuple[str, str]]:
    """The architecture preflight decided, how, and an --arch that config.json overruled (run-folder data:
    one that does not validate gives no row)."""
    try:
        decided = Architecture.model_validate(pre.get("architecture"))
    except ValueError:
        return []
    note = decided.disagreement()
    return [("architecture", f"{decided.name or 'unknown'} ({decided.how()})")] + ([("note", note)] if note else [])


def _write_atomically(path: Path, text: str, images: Iterable[Image] = ()) -> None:
    """A report being rebuilt is never half-written: readers see the old one or the new one. The text is
    made safe (no secret, agent/secrets.py; no raw control character) before ``images`` fill their slots."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(embed_images(printable(redact_text(text)), list(images)))
    os.replace(tmp, path)


PlotWriter = Callable[[list[PointStats], Path], list[Path]]


def _measurement(run_dir: Path, plan: MeasurePlan | None, labels: dict[str, str], verdict: Verdict | None,
                 draw_plots: PlotWriter | None) -> tuple[list[Section], list[Path]]:
    records, problems, failures = load_results(run_dir)
    out: list[Section] = []
    written: list[Path] = []
    if records:
        stats = point_stats(records)
        if draw_plots is None:
            from agent.report.plots import write_plots as draw_plots  # matplotlib is slow to import: only for figures

        plots = draw_plots(stats, run_dir / "plots")
        out += [metrics_section(stats, labels), comparison_section(stats, records, verdict.accept_checks if verdict else []),
                Section("Plots", [Image(p, f"plots/{p.name}", p.stem) for p in plots], id="plots")]
        csv_text, json_text = results_files(stats, labels, records)
        for name, text in (("results.csv", csv_text), ("results.json", json_text)):
            _write_atomically(run_dir / name, text)
            written.append(run_dir / name)
        written += plots
    else:
        out.append(Section("Comparison", [Para("No benchmark results in bench/ (the benchmark was planned, not run, "
                                               "or every point failed).")], id="comparison-section"))
    if plan is not None and plan.accuracy is not None:
        gates = gates_of(run_dir / "bench", plan.accuracy, [v.name for v in plan.variants])
        out.append(accuracy_section(load_accuracy(run_dir / "bench"), gates, plan.accuracy.skip_reason))
    failed = parts.failures_section(failures, problems)
    return out + ([failed] if failed else []), written


def build_report(run_dir: Path | str, extra_sections: Iterable[Section] = (),
                 draw_plots: PlotWriter | None = None) -> list[Path]:
    """Write report.md, report.html, plots/*.png and the combined results; return the paths. ``draw_plots``
    writes the plots of the statistics into the folder (agent/report/plots.py's ``write_plots`` by default)."""
    run_dir = Path(run_dir)
    plan = _plan(run_dir)
    run = RunFiles(run_dir)
    settings = (run.config() or {}).get("settings", {})
    labels = {v.name: setting_label({f.flag: f.value for f in v.flags}) if v.flags else "SGLang defaults"
              for v in plan.variants} if plan else {}
    verdict = _verdict(run_dir, plan, settings)
    benchmark = run.step_outcome("benchmark")
    planned = benchmark is not None and benchmark.status == "planned"
    measured, written = _measurement(run_dir, plan, labels, verdict, draw_plots)
    proof = prove_run(run_dir)
    sections = [*measured]
    sections += [s for s in (configs_in_place_section(run_dir),) if s]
    sections += [s for s in (parts.evidence_section(run_dir), parts.flag_review_section(run_dir),
                             parts.research_notes_section(run_dir)) if s]
    if proof is not None:
        sections.append(parts.proof_section(proof, run_dir))
    sections += [s for s in (parts.steps_section(run_dir), parts.plan_section(run_dir)) if s]
    sections += list(extra_sections)
    md, page = render(f"dsv4-agent report — {run_dir.name}", header(run_dir, plan),
                      verdict_section(verdict, labels, planned), bool(verdict and verdict.recommended), sections)
    _write_atomically(run_dir / "report.md", md)
    _write_atomically(run_dir / "report.html", page, images_in(sections))
    return [run_dir / "report.md", run_dir / "report.html", *written]
