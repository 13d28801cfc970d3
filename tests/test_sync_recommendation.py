"""A commit that changes a hook changes the recommendation: the real evidence engine reads an
SGLang-shaped checkout built from the real sglang 0.5.23 wheel (hooks, Spec fields, model
classes, test fixtures copied verbatim) plus a registered test written the way SGLang's are.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sync_gitrepos import HOOK, Upstream, forbid_eagle, git, sglang_tree
from tools.sync.upstream import SyncArgs, sync_upstream


@pytest.fixture(scope="module")
def hook_text(sglang_wheel_root: Path) -> str:
    return (sglang_wheel_root / "sglang/srt/arg_groups/deepseek_v4_hook.py").read_text()


def test_hook_change_changes_the_recommendation(sglang_wheel_root: Path, hook_text: str, tmp_path: Path):
    upstream = Upstream(tmp_path, sglang_tree(sglang_wheel_root))
    clone = upstream.clone(tmp_path / "sglang")
    new = upstream.commit({HOOK: forbid_eagle(hook_text)}, "[DSV4] Only DSPARK speculative decoding")

    result = sync_upstream(SyncArgs(sglang=str(clone), model="deepseek-ai/DeepSeek-V4-Flash", gpu="NVIDIA H200",
                                    gpus=8))

    assert git(clone, "rev-parse", "HEAD") == new
    assert [(f.category, f.path) for f in result.impact] == [("hook", HOOK)]
    assert (result.evidence_before.status, result.evidence_after.status) == ("ok", "ok")
    before = result.evidence_before.answer["recommended"]
    assert before and before["flags"]["--speculative-algorithm"] == "EAGLE"  # the registered test's recipe
    diff = result.recommendation
    assert diff.status == "changed"
    changed = {c.name: c for c in diff.flags}
    assert "--speculative-algorithm" in changed and changed["--speculative-algorithm"].old == "EAGLE"
    added = [c for c in diff.constraints if c.change == "added"]
    assert added and all(c.cite and c.cite.startswith(HOOK + ":") for c in added)
    assert any("EAGLE" in c.rule for c in diff.constraints if c.change == "removed")
    if not diff.recommended_after:  # EAGLE was the only recipe: the advice is withdrawn, and said so
        assert "recommendation withdrawn" in result.summary
        assert all(c.change == "removed" for c in diff.flags)


def test_campaign_step_diffs_against_the_previous_runs_mtp_json(sglang_wheel_root: Path, hook_text: str,
                                                                 tmp_path: Path):
    from agent.settings.model import Settings
    from agent.run.folder import RunFolder
    from agent.steps.base import PlanStep, StepContext
    from agent.steps.sync import run as run_sync_step
    from agent.run.trace import TraceWriter
    from tools.jobs.local import LocalExecutor
    from tools.mtp.infer import InferMtpArgs, infer_mtp

    upstream = Upstream(tmp_path, sglang_tree(sglang_wheel_root))
    clone = upstream.clone(tmp_path / "sglang")
    runs = tmp_path / "runs"
    earlier = runs / "20200101T000000Z-enable-mtp"
    earlier.mkdir(parents=True)
    answer = infer_mtp(InferMtpArgs(sglang=str(clone), model="deepseek-ai/DeepSeek-V4-Flash"))
    (earlier / "mtp.json").write_text(answer.model_dump_json(indent=2))  # what the infer_mtp step writes
    upstream.commit({HOOK: forbid_eagle(hook_text)}, "[DSV4] Only DSPARK speculative decoding")

    run = RunFolder.create(runs, "pull and enable mtp")
    ctx = StepContext(settings=Settings(sglang_src=str(clone), runs_dir=str(runs)), run=run,
                      trace=TraceWriter(run.trace_path), executor=LocalExecutor(run.jobs_dir), gpus=[],
                      sglang_root=None)
    outcome = run_sync_step(ctx, PlanStep(kind="sync", lane="control", why="--pull"))

    assert outcome.status == "done" and outcome.data["recommendation"] == "changed"
    saved = json.loads((run.path / "sync.json").read_text())
    assert saved["evidence_before"]["source"] == str(earlier / "mtp.json")
    assert {c["name"] for c in saved["recommendation"]["flags"]} >= {"--speculative-algorithm"}
    assert "constraint added" in (run.path / "sync.md").read_text()
