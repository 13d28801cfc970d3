"""`dsv4-agent sync` end to end (the real CLI, run in this process; real git repos) and the campaign step adapter."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agent.exit_codes import ExitCode
from agent.settings.model import Settings
from agent.run.folder import RunFolder
from agent.steps.base import PlanStep, StepContext
from agent.steps.sync import previous_answer, run as run_sync_step
from agent.run.trace import TraceWriter, iter_events
from tests.cli_helpers import run_cli
from tests.messages import assert_refusal
from tests.sync_gitrepos import PYPROJECT, Upstream, git, snapshot, write
from tools.jobs.local import LocalExecutor


def dsv4(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd)


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    return Upstream(tmp_path)


@pytest.fixture
def clone(upstream: Upstream, tmp_path: Path) -> Path:
    return upstream.clone(tmp_path / "sglang")


def bump(upstream: Upstream) -> str:
    return upstream.commit({"python/pyproject.toml": PYPROJECT.replace("sgl-kernel==0.3.21", "sgl-kernel==0.3.22"),
                            "python/sglang/srt/arg_groups/deepseek_v4_hook.py": "# DeepSeek V4 rules\n"},
                           "Bump sgl-kernel; touch the V4 hook")


def test_cli_sync_reports_commits_pins_and_impact(upstream: Upstream, clone: Path, tmp_path: Path):
    new = bump(upstream)
    done = dsv4(tmp_path, "sync", "--sglang", str(clone), "--sglang-python", "/envs/sgl/bin/python", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["pull"]["status"] == "fast_forwarded" and result["pull"]["new_head"] == new
    assert git(clone, "rev-parse", "HEAD") == new
    assert result["dependencies"]["reinstall"] == "/envs/sgl/bin/python -m pip install sgl-kernel==0.3.22"
    assert [f["category"] for f in result["impact"]] == ["hook", "packaging"]
    # Before the pull this tiny tree had no argument hooks, so there was no previous answer; the
    # report says why instead of inventing one.
    assert result["evidence_before"]["status"] == "failed"
    assert result["evidence_after"]["status"] == "ok"
    assert result["recommendation"]["status"] == "no_previous"
    assert "no argument hooks" in result["recommendation"]["note"]



def test_the_target_is_named_as_sglang_serves_it_and_config_json_outranks_arch(upstream: Upstream, clone: Path,
                                                                               tmp_path: Path):
    # DeepSeek-V4.1-Flash's real config.json names DeepseekV41ForCausalLM, which SGLang serves through its V4
    # code: a change to the V4 hook concerns it. The architecture is decided by the one documented order
    # (tools/checkpoint/architecture.py), so a contradicting --arch given to the tool does not win.
    from tests.conftest import shared_checkpoints
    from tools.sync.upstream import SyncArgs, sync_upstream

    bump(upstream)
    checkpoint = shared_checkpoints() / "DeepSeek-V4.1-Flash"
    result = sync_upstream(SyncArgs(sglang=str(clone), model="deepseek-ai/DeepSeek-V4.1-Flash",
                                    model_path=str(checkpoint), architecture="DeepseekV3ForCausalLM"))
    assert "deepseekv4" in result.terms and "deepseekv3" not in result.terms, result.terms
    assert "hook" in [f.category for f in result.impact]

def test_cli_markdown_and_up_to_date(upstream: Upstream, clone: Path, tmp_path: Path):
    bump(upstream)
    first = dsv4(tmp_path, "sync", "--sglang", str(clone / "python"))  # any folder inside the checkout
    assert first.returncode == 0, first.stderr
    assert "## New commits (1)" in first.stdout and "`Bump sgl-kernel; touch the V4 hook`" in first.stdout
    assert "pip install sgl-kernel==0.3.22" in first.stdout
    second = dsv4(tmp_path, "sync", "--sglang", str(clone))
    assert second.returncode == 0 and "is up to date with origin/main" in second.stdout


def test_cli_refusal_exit_1_and_checkout_unchanged(upstream: Upstream, clone: Path, tmp_path: Path):
    bump(upstream)
    write(clone, "python/sglang/srt/arg_groups/deepseek_v4_hook.py", "# my local edit\n")
    before = snapshot(clone)
    done = dsv4(tmp_path, "sync", "--sglang", str(clone), "--allow-dirty")
    assert_refusal(done, "sync refused", "python/sglang/srt/arg_groups/deepseek_v4_hook.py", code=ExitCode.FAILED)
    assert snapshot(clone) == before


def test_cli_bad_input(tmp_path: Path):
    plain = tmp_path / "plain"
    plain.mkdir()
    done = dsv4(tmp_path, "sync", "--sglang", str(plain))
    assert_refusal(done, plain, "git repository", code=ExitCode.FAILED)
    missing = dsv4(tmp_path, "sync")
    assert_refusal(missing, "--sglang PATH")
    gone = dsv4(tmp_path, "sync", "--sglang", str(tmp_path / "nowhere"))
    assert_refusal(gone, tmp_path / "nowhere", "does not exist", code=ExitCode.FAILED)


def make_context(runs: Path, sglang_src: str | None, **settings) -> StepContext:
    run = RunFolder.create(runs, "sync upstream")
    return StepContext(settings=Settings(sglang_src=sglang_src, runs_dir=str(runs), **settings), run=run,
                       trace=TraceWriter(run.trace_path), executor=LocalExecutor(run.jobs_dir), gpus=[],
                       sglang_root=None)


STEP = PlanStep(kind="sync", lane="control", why="asked to pull upstream")


def test_step_writes_artifacts_and_is_idempotent(upstream: Upstream, clone: Path, tmp_path: Path):
    new = bump(upstream)
    ctx = make_context(tmp_path / "runs", str(clone))
    outcome = run_sync_step(ctx, STEP)
    assert outcome.status == "done" and outcome.data["commits"] == 1 and outcome.data["new_head"] == new
    assert sorted(outcome.artifacts) == ["sync.json", "sync.md"]
    saved = json.loads((ctx.run.path / "sync.json").read_text())
    assert saved["dependencies"]["changes"][0]["new"] == "sgl-kernel==0.3.22"
    written = [e["path"] for e in iter_events(ctx.run.trace_path, "artifact_written")]
    assert written == ["sync.json", "sync.md"]

    again = run_sync_step(ctx, STEP)  # a re-run after a crash: the fast-forward already happened
    assert again.status == "done" and again.data["commits"] == 1 and again.data["old_head"] == outcome.data["old_head"]
    assert again.summary == outcome.summary


def test_step_refusal_is_failed_and_leaves_checkout(upstream: Upstream, clone: Path, tmp_path: Path):
    upstream.commit({"README.md": "upstream\n"}, "Upstream readme")
    write(clone, "local.txt", "x\n")
    git(clone, "add", "local.txt")
    git(clone, "commit", "-q", "-m", "local")
    before = snapshot(clone)
    ctx = make_context(tmp_path / "runs", str(clone))
    outcome = run_sync_step(ctx, STEP)
    assert outcome.status == "failed" and outcome.reason == "sync_refused"
    assert "diverged" in outcome.summary and "continues" in outcome.summary
    assert json.loads((ctx.run.path / "sync.json").read_text())["status"] == "refused"
    assert snapshot(clone) == before


def test_step_without_checkout_or_with_plain_folder(tmp_path: Path):
    assert "--sglang PATH" in run_sync_step(make_context(tmp_path / "runs", None), STEP).summary
    plain = tmp_path / "plain"
    plain.mkdir()
    outcome = run_sync_step(make_context(tmp_path / "runs2", str(plain)), STEP)
    assert outcome.status == "failed" and "not inside a git repository" in outcome.summary


def test_previous_answer_is_latest_earlier_run_with_mtp_json(tmp_path: Path):
    runs = tmp_path / "runs"
    for name in ("20260101T000000Z-a", "20260102T000000Z-b", "20260103T000000Z-c", "20260105T000000Z-later"):
        (runs / name).mkdir(parents=True)
    (runs / "20260101T000000Z-a" / "mtp.json").write_text("{}")
    (runs / "20260102T000000Z-b" / "mtp.json").write_text("{}")
    (runs / "20260105T000000Z-later" / "mtp.json").write_text("{}")
    current = runs / "20260104T000000Z-now"
    current.mkdir()
    assert previous_answer(current) == runs / "20260102T000000Z-b" / "mtp.json"
    assert previous_answer(runs / "20260101T000000Z-a") is None
