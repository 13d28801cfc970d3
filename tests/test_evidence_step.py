"""The infer_mtp step adapter with a real run folder, trace and local executor."""
from __future__ import annotations

import json
from pathlib import Path

from agent.settings.layers import load_settings
from agent.run.folder import RunFolder
from agent.steps.base import PlanStep, StepContext
from agent.steps.infer_mtp import run
from agent.run.trace import TraceWriter, iter_events
from tools.gpus import GpuInfo
from tools.jobs.factory import make_executor

FIXTURE = Path(__file__).parent / "fixtures" / "evidence" / "checkout"


def _ctx(tmp_path: Path, model: str) -> StepContext:
    settings = load_settings({"model": model, "sglang_src": str(FIXTURE)}, cwd=tmp_path, environ={})
    folder = RunFolder.create(tmp_path / "runs", "enable mtp")
    trace = TraceWriter(folder.path / "trace.jsonl")
    return StepContext(settings=settings, run=folder, trace=trace, executor=make_executor("local", tmp_path / "jobs"),
                       gpus=[GpuInfo(index=i, name="NVIDIA H100 80GB HBM3", memory_mib=81559) for i in range(4)],
                       sglang_root=None, lane="research")


def test_step_writes_answer_and_evidence_and_is_rerunnable(tmp_path):
    ctx = _ctx(tmp_path, "acme/Moe-Mtp-7B")
    step = PlanStep(kind="infer_mtp", lane="research", why="enable MTP")
    first = run(ctx, step)
    second = run(ctx, step)  # idempotent: same answer, files overwritten
    assert first.status == second.status == "done" and first.data == second.data
    assert first.reason == "recommended"
    answer = json.loads((ctx.run.path / "mtp.json").read_text())
    assert answer["recommended"]["flags"]["--speculative-num-steps"] == "3"  # the 4-gpu-h100 recipe
    recommended = first.data["settings"]["recommended"]
    assert recommended["flag_origins"]["--speculative-num-steps"]["path"].endswith("test_acme_h100.py")
    assert first.data["settings"]["inputs"]["gpus"] == 4 and first.data["settings"]["choices"][0]["name"] == "mtp"
    assert "| `--speculative-eagle-topk` | `1` |" in (ctx.run.path / "evidence.md").read_text()
    types = [e["type"] for e in iter_events(ctx.run.path / "trace.jsonl")]
    # one span per step: the lane records tool_call/tool_result; the adapter adds its findings as progress
    assert types.count("tool_call") == types.count("tool_result") == 0
    found = [e for e in iter_events(ctx.run.path / "trace.jsonl") if e["type"] == "progress"]
    assert len(found) == 2 and found[0]["architecture"] == answer["architecture"] and found[0]["candidates"] >= 1


def test_step_without_evidence_is_done_with_unknowns(tmp_path):
    ctx = _ctx(tmp_path, "nobody/unknown-model")
    outcome = run(ctx, PlanStep(kind="infer_mtp", lane="research", why="enable MTP"))
    settings = outcome.data["settings"]
    assert outcome.status == "done" and outcome.reason == "no_recommendation" and settings["recommended"] is None
    assert outcome.summary.startswith("no MTP recommendation: the goal asks for MTP, but SGLang")
    assert "no speculative evidence for nobody/unknown-model" in outcome.summary and "--arch CLASS" in outcome.summary
    assert settings["no_evidence"] in outcome.summary
