"""Whole campaigns through the real CLI, on doubles at the process boundary (see
tests/campaign_fixtures.py): the two lanes overlap, a hard kill is resumed without launching
anything twice, and each exit status comes from its own path."""
from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path

import pytest

from agent.report.timeline import build_timeline
from agent.run.trace import read_trace
from tests.campaign_fixtures import campaign_args, campaign_env, hold_tuning
from tests.cli_helpers import agent, only_run, run_cli, start_agent, wait_for
from tests.slowdown import limit


def events_of(run: Path) -> list[dict]:
    return read_trace(run / "trace.jsonl").events


def first(events: list[dict], **match) -> dict:
    return next(e for e in events if all(e.get(k) == v for k, v in match.items()))


@pytest.fixture(scope="module")
def finished_campaign(tmp_path_factory, sglang_wheel_root):
    root = tmp_path_factory.mktemp("campaign")
    # The tuning jobs stay busy until the research lane has finished (the double waits for it in
    # the trace), so "research inside the GPU window" does not depend on the machine's speed.
    env = {**campaign_env(root), "DSV4_DOUBLE_HOLD_FOR": '"type": "node_finished".*"node": "research_lane"'}
    out = agent(*campaign_args(root, sglang_wheel_root, concurrency="1,2"), cwd=root, env=env, timeout=240)
    return root, out


def test_campaign_on_doubles_finishes_and_leaves_a_reviewable_run(finished_campaign):
    root, out = finished_campaign
    assert out.returncode == 0, out.stdout + out.stderr
    run = only_run(root)
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "finished"
    assert result["steps"] == {"tune_kernels": "done", "infer_mtp": "done", "write_scripts": "done", "benchmark": "done"}
    for name in ("config.json", "plan.md", "serve_baseline.sh", "serve_mtp.sh", "run_measure.sh", "report.html",
                 "mtp.json", "tuning/manifest.json"):
        assert (run / name).exists(), name
    assert "--speculative-algorithm EAGLE" in (run / "serve_mtp.sh").read_text()
    installed = json.loads((run / "steps" / "tune_kernels.json").read_text())["data"]["installed"]
    assert len(installed) == 2 and all(Path(p).exists() for p in installed)
    points = [json.loads(line) for v in ("baseline", "mtp") for line in (run / "bench" / f"{v}.jsonl").read_text().splitlines()]
    assert len(points) == 4
    # --min-prompts 2 --prompts-per-concurrency 2: the floor at c1, 2 x c above it
    assert sorted((p["max_concurrency"], p["completed"]) for p in points) == [(1, 2), (1, 2), (2, 4), (2, 4)]
    # the trace is whole: gap-free sequence, run_started first, run_finished last
    events = events_of(run)
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"


def test_research_runs_inside_the_gpu_window(finished_campaign):
    root, _ = finished_campaign
    events = events_of(only_run(root))
    tune_start = first(events, type="job_launched", key="tune-gpu0")["t"]
    tune_end = max(e["t"] for e in events if e["type"] == "job_finished" and e["key"].startswith("tune-"))
    research_end = first(events, type="node_finished", node="research_lane")["t"]
    mtp_done = first(events, type="tool_result", tool="infer_mtp")["t"]
    assert tune_start < mtp_done < tune_end  # evidence was gathered while the tuning jobs ran
    assert research_end < tune_end
    timeline = build_timeline(events)
    assert timeline.overlap_pct is not None and timeline.overlap_pct > 50


def test_the_timeline_draws_every_job_the_campaign_ran(finished_campaign):
    """Every job that finished was launched in the trace (the bench points and servers too), so the
    timeline drops none: timeline.png draws a bar for every job and the terminal view names each. A
    label is drawn only where it fits, which the jobs' durations on this machine decide, so only the
    tuning jobs' (a large part of any run) are required in the picture."""
    from PIL import Image

    from agent.report.timeline_view import PNG_META_KEY, render_terminal

    root, _ = finished_campaign
    run = only_run(root)
    events = events_of(run)
    launched = Counter(e["key"] for e in events if e["type"] == "job_launched")
    finished = Counter(e["key"] for e in events if e["type"] == "job_finished")
    assert launched == finished
    assert {"tune-gpu0", "tune-gpu1", "serve-baseline", "serve-mtp", "bench-baseline-c1", "bench-mtp-c2"} <= set(launched)
    timeline = build_timeline(events)
    assert timeline.notes == []  # no "job_finished events had no job_launched"
    lanes = {b.label: b.lane for b in timeline.bars}
    assert lanes["bench-mtp-c1"] == "clients (no GPU)" and lanes["serve-mtp"].startswith("GPU ")
    shown = json.loads(Image.open(run / "timeline.png").text[PNG_META_KEY])
    assert set(launched) <= set(shown["drawn"])  # the picture was drawn before the report's own node ended
    assert {"tune-gpu0", "tune-gpu1"} <= set(shown["labelled"]) <= set(shown["drawn"])
    terminal = render_terminal(timeline)
    assert all(key in terminal for key in launched), terminal




def _launched_tune_jobs(root: Path) -> int:
    runs = list((root / "runs").glob("*/trace.jsonl")) if (root / "runs").exists() else []
    if not runs:
        return 0
    text = runs[0].read_text()
    return text.count('"type": "job_launched", "key": "tune-gpu')


def test_kill_9_mid_campaign_then_resume_launches_nothing_twice(tmp_path, sglang_wheel_root):
    hold_env, hold = hold_tuning(tmp_path)  # the jobs are mid-tuning at the kill, however slow the machine
    proc = start_agent(*campaign_args(tmp_path, sglang_wheel_root), cwd=tmp_path,
                       env={**campaign_env(tmp_path, unit_s=0.05), **hold_env})
    wait_for(lambda: _launched_tune_jobs(tmp_path) >= 2, 60, "the tuning jobs to start")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=limit(10))
    hold.unlink()
    run = only_run(tmp_path)
    assert not (run / "result.json").exists()  # a killed run is not finished
    before = events_of(run)
    out = run_cli("resume", "latest", cwd=tmp_path, env=campaign_env(tmp_path, unit_s=0.05))
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "finished"
    # every tuning unit ran exactly once across the kill (the double logs each tune() call)
    calls = Counter((tmp_path / "tune_calls.txt").read_text().splitlines())
    assert calls and max(calls.values()) == 1, calls.most_common(3)
    # each tune job folder was launched once; after the resume the jobs were re-attached
    for key in ("tune-gpu0", "tune-gpu1"):
        assert (run / "jobs" / key / "launch.json").exists()
        assert (run / "jobs" / key / "log.txt").read_text().count("[dsv4-agent] could not start") == 0
    after = events_of(run)
    assert [e["seq"] for e in after] == list(range(len(after)))  # nothing lost, nothing renumbered
    assert after[: len(before)] == before
    resumed = [e for e in after[len(before):] if e["type"] == "job_launched" and e["key"].startswith("tune-")]
    assert resumed and all(e["attached"] for e in resumed)
    assert any(e["type"] == "run_resumed" for e in after)


def test_interrupt_records_interrupted_and_resume_finishes(tmp_path, sglang_wheel_root):
    held, hold = hold_tuning(tmp_path)  # the jobs still run when the interrupt lands, however slow the machine
    proc = start_agent(*campaign_args(tmp_path, sglang_wheel_root), cwd=tmp_path,
                       env={**campaign_env(tmp_path, unit_s=0.4), **held})
    wait_for(lambda: _launched_tune_jobs(tmp_path) >= 2, 60, "the tuning jobs to start")
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=limit(30))
    hold.unlink()
    assert proc.returncode == 130, output
    run = only_run(tmp_path)
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "interrupted" and "dsv4-agent resume" in result["summary"]
    assert "tune-gpu" in result["summary"]  # it says which jobs it left running
    out = run_cli("resume", run.name, cwd=tmp_path, env=campaign_env(tmp_path, unit_s=0.4))
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads((run / "result.json").read_text())["status"] == "finished"
    assert (run / "result.attempt-1.json").exists()  # the interrupted attempt's result is kept


def test_no_gpu_ends_planned_with_scripts_and_the_next_command(tmp_path):
    out = run_cli("enable MTP and tune kernels", cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stdout + out.stderr
    run = only_run(tmp_path)
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "planned"
    assert result["steps"]["benchmark"] == "planned" and result["steps"]["infer_mtp"] == "done"
    assert f"dsv4-agent resume {run.relative_to(tmp_path)}" in result["next"]
    assert "next step:" in out.stdout
    for script in ("serve_baseline.sh", "serve_mtp.sh", "run_measure.sh"):
        assert (run / script).exists()


def test_a_failed_step_ends_the_run_failed(tmp_path):
    not_a_checkout = tmp_path / "plain"  # an SGLang package, but no git checkout to pull into
    (not_a_checkout / "sglang").mkdir(parents=True)
    (not_a_checkout / "sglang" / "__init__.py").write_text("")
    out = run_cli("sync upstream", "--sglang", str(not_a_checkout), cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 1, out.stdout + out.stderr
    result = json.loads((only_run(tmp_path) / "result.json").read_text())
    assert result["status"] == "failed" and result["steps"] == {"sync": "failed"}


def test_each_step_is_one_span_with_the_step_status_vocabulary(finished_campaign):
    from typing import get_args

    from agent.steps.base import StepStatus

    root, _ = finished_campaign
    events = events_of(only_run(root))
    steps = [e for e in events if e["type"] in ("tool_call", "tool_result") and e["lane"] != "llm"]
    calls = Counter(e["tool"] for e in steps if e["type"] == "tool_call")
    results = Counter(e["tool"] for e in steps if e["type"] == "tool_result")
    assert calls == results == Counter({"tune_kernels": 1, "infer_mtp": 1, "write_scripts": 1, "benchmark": 1})
    assert {e["status"] for e in steps if e["type"] == "tool_result"} <= set(get_args(StepStatus))
