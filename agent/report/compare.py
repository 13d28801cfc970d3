"""Two runs side by side, read from their folders alone: ``dsv4-agent compare RUN_A RUN_B`` (text or
``--json``) and the "Compared with" section of ``dsv4-agent report RUN --compare OTHER``.

Side by side: where each ran, the settings and variant flags that differ (with the evidence each
cites), the MTP evidence, the points matched by variant and concurrency (B / A with both runs'
spread, as the verdict reads ratios), and the two verdicts. B is read against A: "before / after an
upstream pull" is ``compare BEFORE AFTER``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from agent.run.folder import RunFolder
from tools.measure.decision import bench_records
from tools.mtp.answer import MtpAnswer
from tools.mtp.variants import setting_label
from tools.measure.verdict import PointStats, Ratio, point_stats, ratio
from tools.scripts.models import MeasurePlan

METRICS = {"tpot_ms": "median_tpot_ms", "ttft_ms": "median_ttft_ms", "throughput": "output_throughput"}


@dataclass
class Side:
    path: Path
    config: dict
    preflight: dict
    result: dict
    plan: MeasurePlan | None
    answer: MtpAnswer | None
    verdict: dict | None
    stats: list[PointStats] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> "Side":
        records, _ = bench_records(path / "bench") if (path / "bench").is_dir() else ([], [])
        run = RunFolder(path)  # read only; a damaged run file is named in one line (agent/run/run_files.py)
        verdict, plan = run.verdict(), run.measure_plan()
        return cls(path=path, config=run.config() or {}, preflight=run.preflight() or {}, result=run.result or {},
                   plan=plan, answer=run.mtp_answer(), verdict=verdict.model_dump(mode="json") if verdict else None,
                   stats=point_stats(records))

    def where(self) -> dict:
        source = self.preflight.get("sglang_source") or {}
        gpus = self.preflight.get("gpus") or []
        names = sorted({g.get("name", "?") for g in gpus})
        return {"run": str(self.path), "goal": self.config.get("goal"), "status": self.result.get("status"),
                "sglang": {k: source.get(k) for k in ("version", "commit", "kind", "root")},
                "gpus": f"{len(gpus)} × {', '.join(names)}" if gpus else "none",
                "executor": self.preflight.get("executor") or self.config.get("settings", {}).get("executor"),
                "recommended": (self.verdict or {}).get("recommended"), "reason": (self.verdict or {}).get("reason")}

    def variants(self) -> dict[str, dict[str, tuple[str, str]]]:
        """variant -> flag -> (value, the evidence this run cites for it)."""
        if self.plan is None:
            return {}
        return {v.name: {f.flag: (f.value, f.source) for f in v.flags} for v in self.plan.variants}


def _settings(a: Side, b: Side) -> list[dict]:
    from agent.settings.model import Settings
    from agent.settings.of_run import known_settings

    defaults = Settings().public_dump()  # a setting a run's build did not know yet had its default then
    (sa, _), (sb, _) = (known_settings(side.config.get("settings") or {}) for side in (a, b))  # as every reader
    compared = Settings.marked("compared")  # not where the folder is, nor a secret (never recorded)
    keys = sorted(k for k in set(sa) | set(sb) if k in compared)
    va = {k: sa.get(k, defaults.get(k)) for k in keys}
    vb = {k: sb.get(k, defaults.get(k)) for k in keys}
    return [{"setting": k, "a": va[k], "b": vb[k]} for k in keys if va[k] != vb[k]]


def _evidence(side: Side) -> dict | None:
    answer = side.answer
    if answer is None:
        return None
    flags = answer.recommended.flags if answer.recommended else None
    source = answer.source
    return {"architecture": answer.architecture, "recommended": flags,
            "setting": setting_label(flags) if flags else None, "candidates": len(answer.candidates),
            "source": f"SGLang {source.version or '?'} ({source.kind}"
                      + (f", commit {source.commit[:12]}" if source.commit else "") + ")"}


def _variants(a: Side, b: Side) -> list[dict]:
    va, vb = a.variants(), b.variants()
    out = []
    for name in sorted(set(va) | set(vb), key=lambda n: (n != "baseline", n)):
        fa, fb = va.get(name), vb.get(name)
        flags = []
        for flag in sorted(set(fa or {}) | set(fb or {})):
            (val_a, why_a), (val_b, why_b) = (fa or {}).get(flag, (None, None)), (fb or {}).get(flag, (None, None))
            if val_a != val_b:
                flags.append({"flag": flag, "a": val_a, "b": val_b, "a_source": why_a, "b_source": why_b})
        out.append({"variant": name, "a": _label(fa), "b": _label(fb), "flags": flags})
    return out


def _label(flags: dict[str, tuple[str, str]] | None) -> str | None:
    if flags is None:
        return None
    return setting_label({k: v for k, (v, _) in flags.items()}) if flags else "SGLang defaults"


def _figure(stats: PointStats | None) -> dict | None:
    if stats is None:
        return None
    figures = {k: stats.metrics[m].median for k, m in METRICS.items() if m in stats.metrics}
    return {**figures, "accept_length": stats.accept_length, "repeats": stats.repeats}


def _ratio(a: PointStats | None, b: PointStats | None, metric: str) -> Ratio | None:
    if a is None or b is None or metric not in a.metrics or metric not in b.metrics:
        return None
    return ratio(b.metrics[metric], a.metrics[metric])


def _points(a: Side, b: Side) -> list[dict]:
    pa = {(s.variant, s.concurrency): s for s in a.stats}
    pb = {(s.variant, s.concurrency): s for s in b.stats}
    out = []
    for key in sorted(set(pa) | set(pb), key=lambda k: (k[0] != "baseline", k[0], k[1])):
        ratios = {k: _ratio(pa.get(key), pb.get(key), m) for k, m in METRICS.items()}
        out.append({"variant": key[0], "concurrency": key[1], "a": _figure(pa.get(key)), "b": _figure(pb.get(key)),
                    "b_over_a": {k: (r.model_dump() | {"text": r.text()}) if r else None for k, r in ratios.items()}})
    return out


def compare_runs(run_a: Path, run_b: Path) -> dict:
    """The comparison as data (``compare --json``; docs/cli-json.schema.json ``compare``)."""
    a, b = Side.read(run_a), Side.read(run_b)
    ev_a, ev_b = _evidence(a), _evidence(b)
    return {"a": a.where(), "b": b.where(), "settings": _settings(a, b),
            "evidence": {"a": ev_a, "b": ev_b, "same": (ev_a or {}).get("recommended") == (ev_b or {}).get("recommended")},
            "variants": _variants(a, b), "points": _points(a, b)}


def _num(value, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def rows(data: dict) -> dict[str, tuple[list[str], list[list[str]]]]:
    """The comparison's tables (columns, rows), shared by the text and the report section."""
    settings = (["setting", "A", "B"], [[s["setting"], json.dumps(s["a"]), json.dumps(s["b"])] for s in data["settings"]])
    flags = (["variant", "flag", "A", "B", "A's evidence", "B's evidence"],
             [[v["variant"], f["flag"], f["a"] if f["a"] is not None else "(not set)",
               f["b"] if f["b"] is not None else "(not set)", f["a_source"] or "-", f["b_source"] or "-"]
              for v in data["variants"] for f in v["flags"]]
             + [[v["variant"], "(variant)", v["a"] or "(not measured)", v["b"] or "(not measured)", "", ""]
                for v in data["variants"] if v["a"] is None or v["b"] is None])
    points = (["variant", "conc", "TPOT ms A", "TPOT ms B", "TPOT B/A", "TTFT ms A", "TTFT ms B", "TTFT B/A",
               "out tok/s A", "out tok/s B", "out tok/s B/A", "accept A", "accept B"], [])
    for p in data["points"]:
        fa, fb, r = p["a"] or {}, p["b"] or {}, p["b_over_a"]
        points[1].append([p["variant"], str(p["concurrency"]), _num(fa.get("tpot_ms")), _num(fb.get("tpot_ms")),
                          (r["tpot_ms"] or {}).get("text", "-"), _num(fa.get("ttft_ms")), _num(fb.get("ttft_ms")),
                          (r["ttft_ms"] or {}).get("text", "-"), _num(fa.get("throughput"), 0),
                          _num(fb.get("throughput"), 0), (r["throughput"] or {}).get("text", "-"),
                          _num(fa.get("accept_length")), _num(fb.get("accept_length"))])
    return {"settings": settings, "flags": flags, "points": points}


def headline(data: dict) -> list[str]:
    lines = []
    for side in ("a", "b"):
        w = data[side]
        sg = w["sglang"]
        deploy = f"deploy {w['recommended']}" if w["recommended"] else "no verdict" if w["reason"] is None else \
            "no recommendation"
        lines.append(f"{side.upper()}: {w['run']} ({w['status'] or 'not finished'}): {w['goal']}; SGLang "
                     f"{sg.get('version') or '?'}" + (f" at {sg['commit'][:12]}" if sg.get("commit") else "")
                     + f"; GPUs {w['gpus']}; {deploy}")
    ev = data["evidence"]
    if ev["a"] or ev["b"]:
        shown = {k: (e or {}).get("setting") or "no recommendation" for k, e in ev.items() if k != "same"}
        lines.append("MTP evidence: " + (f"the same recommendation ({shown['a']})" if ev["same"] else
                                         f"A recommends {shown['a']}, B {shown['b']}"))
    return lines


NOTE = ("B / A per variant and concurrency, medians of the repeats with the range of both runs' repeats in "
        "brackets: below 1 is faster for TPOT and TTFT, above 1 is more throughput; a range that holds 1.00 is "
        "no measurable change, and one sample is never measurable.")


TITLES = {"settings": "Settings that differ", "flags": "Flags that differ, and the evidence each run cites",
          "points": "Measured points"}
NONE = {"settings": "none", "flags": "none (every variant both runs have has the same flags)",
        "points": "none (neither run measured a point)"}


def verdicts(data: dict) -> list[str]:
    return [f"{side.upper()}: " + (f"deploy {w['recommended']}: {w['reason']}" if w["recommended"] else
                                   f"no recommendation: {w['reason']}" if w["reason"] else "not measured")
            for side, w in (("a", data["a"]), ("b", data["b"]))]


def render_text(data: dict) -> str:
    out = headline(data)
    for key, (columns, body) in rows(data).items():
        out += ["", f"{TITLES[key].lower()}:" if body else f"{TITLES[key].lower()}: {NONE[key]}"]
        if body:
            out += _aligned(columns, body)
    if data["points"]:
        out += ["", NOTE]
    return "\n".join(out + ["", "verdicts:", *(f"  {line}" for line in verdicts(data))])


def _aligned(columns: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [columns, *body]) for i in range(len(columns))]
    return ["  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [columns, *body]]


def compare_section(reference: Path, run: Path):
    """The report's "Compared with" section: ``run`` (B) read against ``reference`` (A)."""
    from agent.report.blocks import Items, Para, Section
    from agent.report.table import Table

    data = compare_runs(reference, run)
    blocks: list = [Para(f"This run is B, read against A, {reference.name}."), Items(headline(data))]
    for key, (columns, body) in rows(data).items():
        blocks.append(Para(f"{TITLES[key]}:" if body else f"{TITLES[key]}: {NONE[key]}."))
        if body:
            table = Table(columns, id=f"compare-{key}")
            for row in body:
                table.add(*row)
            blocks.append(table)
    if data["points"]:
        blocks.append(Para(NOTE))
    blocks += [Para("Verdicts:"), Items(verdicts(data))]
    return Section(f"Compared with {reference.name}", blocks, id="compare")
