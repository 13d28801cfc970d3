"""Run a recorded campaign again for real, into a new run folder, and say what changed.

The new run is an ordinary campaign (same goal, the recorded settings taken back as ``resume`` takes
them: agent/settings/of_run.py; the LLM key is the user's) on the environment as it is now, e.g.
after ``dsv4-agent sync``. The diff covers what a reviewer compares: MTP evidence and recommended
flags (``mtp.json`` and the ``infer_mtp`` step's data), tuned shapes (the ``tune_kernels`` step's
data), and benchmark figures (``bench/*.jsonl`` and the ``benchmark`` step's data).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tools import json_data
from agent.replay.record import RecordError
from agent.run.run_files import CONFIG, MTP_ANSWER, RunFiles, read_run_json, step_file

MAX_DIFF_LINES = 80


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """JSON as ``{dotted.path: leaf}``, so two records diff key by key."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out or {prefix: {}}
    if isinstance(value, list):
        out = {}
        for i, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{i}]"))
        return out or {prefix: []}
    return {prefix: value}


def _jsonl(path: Path) -> list:
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            rows.append(json_data.loads(line))
        except json.JSONDecodeError:
            rows.append({"unparsable_line": line[:200]})
    return rows


def compared_facts(run_dir: Path) -> dict[str, dict[str, Any]]:
    """What the diff compares, by topic, flattened."""
    run = RunFiles(run_dir)  # the files as written: a diff compares them, field by field
    step = lambda kind: (run.json_object(step_file(kind)) or {}).get("data", {})  # noqa: E731
    mtp_files = {str(p.relative_to(run_dir)): read_run_json(p) for p in sorted(run_dir.rglob(MTP_ANSWER))}
    bench = {str(p.relative_to(run_dir)): _jsonl(p) for p in sorted((run_dir / "bench").glob("*.jsonl"))} \
        if (run_dir / "bench").is_dir() else {}
    return {
        "evidence and recommended flags": flatten({"files": mtp_files, "infer_mtp": step("infer_mtp")}),
        "tuned shapes": flatten({"tune_kernels": step("tune_kernels")}),
        "benchmark figures": flatten({"files": bench, "benchmark": step("benchmark")}),
    }


def diff_runs(old: Path, new: Path, limit: int = MAX_DIFF_LINES) -> str:
    before, after = compared_facts(old), compared_facts(new)
    lines: list[str] = []
    for topic in before:
        a, b = before[topic], after[topic]
        changes = []
        for key in sorted(set(a) | set(b)):
            if key not in b:
                changes.append(f"  - {key}: {_show(a[key])} (gone)")
            elif key not in a:
                changes.append(f"  + {key}: {_show(b[key])} (new)")
            elif a[key] != b[key]:
                changes.append(f"  ~ {key}: {_show(a[key])} → {_show(b[key])}")
        lines.append(f"{topic}: " + (f"{len(changes)} changed" if changes else "no change"))
        lines += changes
    if len(lines) > limit:
        cut = len(lines) - limit
        lines = lines[:limit] + [f"… {cut} more diff lines cut (limit {limit}); compare the run folders"]
    return "\n".join(lines)


def _show(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "…"


def rerun_settings(run_dir: Path, runs_dir: Path | str) -> tuple[str, Any]:
    """The recorded goal and settings as ``resume`` takes them back (agent/settings/of_run.py), new runs
    under ``runs_dir``: checked before anything is replayed or run."""
    from agent.settings.of_run import settings_of_run

    config = RunFiles(run_dir).config()
    if config is None or "goal" not in config:
        raise RecordError(f"{run_dir} has no config.json with the goal: not a dsv4-agent run folder")
    return config["goal"], settings_of_run(run_dir, {"runs_dir": str(Path(runs_dir).resolve())}, "continue").settings


def rerun(run_dir: Path | str, goal: str, settings) -> tuple[int, Path, str]:
    """Start the recorded campaign again with ``goal`` and ``settings`` (``rerun_settings``) as a new run;
    (exit code, new run, diff)."""
    from agent.campaign.start_resume import start

    run_dir = Path(run_dir)
    runs_dir = Path(settings.runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in runs_dir.iterdir()}
    code = start(settings, goal)  # the campaign's own plain live view prints its progress
    created = sorted(p for p in runs_dir.iterdir() if p.name not in before and (p / CONFIG).exists())
    if not created:
        raise RecordError(f"the re-run made no run folder in {runs_dir}; see the messages above")
    new = created[-1]
    return code, new, diff_runs(run_dir, new)
