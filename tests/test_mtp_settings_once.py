"""A campaign works its MTP settings out once (tools/mtp/settings.py counts its calls into the file
DSV4_MTP_SETTINGS_CALLS names): with --mtp-steps up front, handed to the step; without, in the step
only; a resume whose infer_mtp outcome is recorded works nothing out again."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli

NO_GPU = {"PATH": "/usr/bin:/bin"}


@pytest.mark.parametrize("more", [["--mtp-steps", "2"], []], ids=["mtp-steps", "default"])
def test_the_mtp_settings_are_worked_out_once_per_campaign(tmp_path: Path, sglang_wheel_root: Path, more: list[str]):
    calls = tmp_path / "calls.txt"
    env = {**NO_GPU, "DSV4_MTP_SETTINGS_CALLS": str(calls)}
    out = run_cli("enable MTP", "--sglang", str(sglang_wheel_root), *more, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    assert len(calls.read_text().splitlines()) == 1, calls.read_text()
    run = next((tmp_path / "runs").glob("*"))
    step = json.loads((run / "steps" / "infer_mtp.json").read_text())
    labels = [c["flags"].get("--speculative-num-steps") for c in step["data"]["settings"]["choices"]]
    assert ("2" in labels) == bool(more), labels  # the user's setting was judged in that one call
    plan = json.loads((run / "measure_plan.json").read_text())
    assert len(plan["variants"]) == 1 + len(labels)  # the plan measures what the step judged, nothing more
    resumed = run_cli("resume", str(run), cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr
    assert "infer_mtp: reusing recorded outcome" in (run / "trace.jsonl").read_text()
    assert len(calls.read_text().splitlines()) == 1, calls.read_text()


def _pulled_checkout(tmp_path: Path, wheel: Path) -> tuple[Path, str]:
    """An upstream-shaped SGLang clone one commit behind its upstream, the commit forbidding EAGLE."""
    from tests.sync_gitrepos import Upstream
    from tests.sync_gitrepos import HOOK, forbid_eagle, sglang_tree

    upstream = Upstream(tmp_path, sglang_tree(wheel))
    clone = upstream.clone(tmp_path / "sglang")
    new_head = upstream.commit({HOOK: forbid_eagle((wheel / "sglang/srt/arg_groups/deepseek_v4_hook.py").read_text())},
                               "[DSV4] Only DSPARK speculative decoding")
    return clone, new_head


def test_a_pull_campaign_judges_the_tree_before_and_after_and_the_step_takes_the_after(
        tmp_path: Path, sglang_wheel_root: Path):
    clone, new_head = _pulled_checkout(tmp_path, sglang_wheel_root)
    calls = tmp_path / "calls.txt"
    env = {**NO_GPU, "DSV4_MTP_SETTINGS_CALLS": str(calls)}
    out = run_cli("enable MTP", "--pull", "--sglang", str(clone), cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    assert len(calls.read_text().splitlines()) == 2, calls.read_text()  # before the pull, after it
    run = next((tmp_path / "runs").glob("*"))
    sync = json.loads((run / "steps" / "sync.json").read_text())
    assert sync["data"]["status"] == "fast_forwarded" and sync["data"]["new_head"] == new_head
    settings = json.loads((run / "steps" / "infer_mtp.json").read_text())["data"]["settings"]
    assert settings["source"]["commit"] == new_head
    after = json.loads((run / "sync.json").read_text())["evidence_after"]["answer"]["recommended"]
    assert (settings["recommended"] or {}).get("flags") == (after or {}).get("flags")
    plan = json.loads((run / "measure_plan.json").read_text())
    assert len(plan["variants"]) == 1 + len(settings["choices"])  # the after-pull settings are what is measured
    resumed = run_cli("resume", str(run), cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr
    assert len(calls.read_text().splitlines()) == 2, calls.read_text()


def test_the_step_judges_again_when_its_gpus_differ_from_the_syncs(tmp_path: Path, sglang_wheel_root: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    """A resume on a host with GPUs reuses the sync recorded without them: the step's inputs differ."""
    from agent.settings.model import Settings
    from agent.run.folder import RunFolder
    from agent.steps.base import PlanStep, StepContext
    from agent.steps.infer_mtp import run as run_infer_step
    from agent.steps.sync import run as run_sync_step
    from agent.run.trace import TraceWriter
    from tools.gpus import GpuInfo
    from tools.jobs.local import LocalExecutor

    clone, new_head = _pulled_checkout(tmp_path, sglang_wheel_root)
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv("DSV4_MTP_SETTINGS_CALLS", str(calls))
    run = RunFolder.create(tmp_path / "runs", "pull and enable mtp")

    def context(gpus: list[GpuInfo], outcomes: dict) -> StepContext:
        return StepContext(settings=Settings(sglang_src=str(clone), runs_dir=str(tmp_path / "runs")), run=run,
                           trace=TraceWriter(run.trace_path), executor=LocalExecutor(run.jobs_dir), gpus=gpus,
                           sglang_root=clone, outcomes=outcomes)

    synced = run_sync_step(context([], {}), PlanStep(kind="sync", lane="control", why="--pull"))
    assert synced.data["mtp_after"]["inputs"]["gpus"] is None
    assert len(calls.read_text().splitlines()) == 2
    h200 = [GpuInfo(index=i, name="NVIDIA H200", memory_mib=143771) for i in range(8)]
    step = PlanStep(kind="infer_mtp", lane="research", why="goal asks for MTP")
    inferred = run_infer_step(context(h200, {"sync": synced}), step)
    assert inferred.status == "done", inferred.summary
    assert len(calls.read_text().splitlines()) == 3, calls.read_text()  # its own call: other inputs
    assert inferred.data["settings"]["inputs"]["gpus"] == 8
    assert inferred.data["settings"]["source"]["commit"] == new_head
    same = run_infer_step(context([], {"sync": synced}), step)  # the sync's inputs: taken, not judged again
    assert same.data["settings"]["source"]["commit"] == new_head
    assert len(calls.read_text().splitlines()) == 3, calls.read_text()
