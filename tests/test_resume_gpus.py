"""Resuming on other GPUs than the run began with (on the doubles of tests/campaign_fixtures.py).

A run killed while tuning on two GPUs is resumed with ``--gpus`` naming others: fewer, overlapping,
more. Units already tuned are kept, the rest are handed to the GPUs given now, nothing runs on a GPU
left out, and no unit is tuned twice beyond the ones the jobs were in when they were handed on. A run
planned without GPUs for ``--target-gpus N`` is resumed on a host with N GPUs, its servers and TP
following them; another count is refused naming the option that resolves it.
"""
from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path

import pytest

from agent.run.trace import read_trace
from tests.campaign_fixtures import campaign_args, campaign_env
from tests.cli_helpers import only_run, run_cli, start_agent, wait_for
from tests.messages import assert_finished_refused, assert_refusal
from tests.slowdown import limit

TUNE = "tune kernels"


def _killed_while_tuning(root: Path, wheel_root: Path, gpus: str, count: int) -> Path:
    env = campaign_env(root, gpus=count, unit_s=2.0)  # long enough to be handed on mid-way
    proc = start_agent(*campaign_args(root, wheel_root, TUNE), "--gpus", gpus, cwd=root, env=env)
    first = gpus.split(",")[-1]
    wait_for(lambda: (root / "runs").exists() and list((root / "runs").glob(f"*/jobs/tune-gpu{first}/wrapper.json")),
             120, "the tuning jobs to run")
    run = only_run(root)
    wait_for(lambda: "units tuned" in (run / "trace.jsonl").read_text(), 120, "a first unit to be tuned")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=limit(10))
    return run


def _jobs(run: Path, root: Path, env: dict) -> dict[str, dict]:
    out = run_cli("jobs", str(run), "--json", cwd=root, env=env)
    assert out.returncode == 0, out.stderr
    return {j["key"]: j for j in json.loads(out.stdout)}


@pytest.mark.parametrize("before, after, count", [("0,1", "1", 2), ("0,1", "1,2", 3), ("0,1", "0,1,2", 3)],
                         ids=["fewer", "overlapping", "more"])
def test_tuning_resumed_on_other_gpus_keeps_finished_units_and_hands_on_the_rest(tmp_path, sglang_wheel_root,
                                                                                before, after, count):
    run = _killed_while_tuning(tmp_path, sglang_wheel_root, before, count)
    env = campaign_env(tmp_path, gpus=count, unit_s=0.05)
    out = run_cli("resume", str(run), "--gpus", after, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads((run / "result.json").read_text())["status"] == "finished"
    assert "the GPUs differ from the last attempt's" in out.stdout
    wanted = [int(g) for g in after.split(",")]
    assert [g["index"] for g in json.loads((run / "preflight.json").read_text())["gpus"]] == wanted
    jobs = _jobs(run, tmp_path, env)
    assert not [k for k, j in jobs.items() if j["status"] == "running"], jobs  # nothing left running anywhere
    second = {k: j for k, j in jobs.items() if k.startswith("tune-r2-")}
    assert second and {g for j in second.values() for g in j["gpus"]} <= set(wanted), jobs  # only the GPUs given
    for key in (f"tune-gpu{g}" for g in before.split(",")):
        assert jobs[key]["status"] in ("stopped", "succeeded"), jobs[key]
    calls = Counter((tmp_path / "tune_calls.txt").read_text().splitlines())
    assert sum(n > 1 for n in calls.values()) <= len(before.split(","))  # at most the unit each job was in
    assert max(calls.values()) <= 2
    outcome = json.loads((run / "steps" / "tune_kernels.json").read_text())
    assert outcome["status"] == "done" and outcome["reason"] == "tuned", outcome
    progress = [e["message"] for e in read_trace(run / "trace.jsonl").events if e["type"] == "progress"]
    assert any("units already tuned are kept" in m for m in progress), progress

    again = run_cli("resume", str(run), cwd=tmp_path, env=env)
    assert_finished_refused(again, run.name)


def test_tuning_resumed_on_the_same_gpus_goes_on_with_its_round(tmp_path, sglang_wheel_root):
    run = _killed_while_tuning(tmp_path, sglang_wheel_root, "0,1", 2)
    env = campaign_env(tmp_path, gpus=2, unit_s=0.05)
    out = run_cli("resume", str(run), "--gpus", "0,1", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert sorted(k for k in _jobs(run, tmp_path, env) if k.startswith("tune-")) == ["tune-gpu0", "tune-gpu1"]
    calls = Counter((tmp_path / "tune_calls.txt").read_text().splitlines())
    assert max(calls.values()) == 1  # re-attached: each unit tuned once


BENCH = "benchmark baseline"


def _planned(root: Path, wheel_root: Path, target: int) -> Path:
    out = run_cli(*campaign_args(root, wheel_root, BENCH), "--target-gpus", str(target), cwd=root,
                  env=campaign_env(root, gpus=0))
    assert out.returncode == 0, out.stdout + out.stderr
    run = only_run(root)
    assert json.loads((run / "result.json").read_text())["status"] == "planned"
    return run


def _server_argv(run: Path) -> list[str]:
    return json.loads((run / "jobs" / "serve-baseline" / "job.json").read_text())["argv"]


def test_a_plan_for_a_target_gpu_count_resumes_on_a_host_with_that_count(tmp_path, sglang_wheel_root):
    run = _planned(tmp_path, sglang_wheel_root, 2)
    assert "TP=${TP:-2}" in (run / "serve_baseline.sh").read_text()
    out = run_cli("resume", str(run), cwd=tmp_path, env=campaign_env(tmp_path, gpus=2))
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads((run / "result.json").read_text())["status"] == "finished"
    argv = _server_argv(run)
    assert argv[argv.index("--tp-size") + 1] == "2", argv


def test_a_plan_for_another_gpu_count_is_refused_naming_gpus_then_follows_them(tmp_path, sglang_wheel_root):
    run = _planned(tmp_path, sglang_wheel_root, 8)
    env = campaign_env(tmp_path, gpus=4)
    refused = run_cli("resume", str(run), cwd=tmp_path, env=env)
    assert_refusal(refused, "8 GPUs", "--target-gpus 8", "4 are here", "--gpus 0,1,2,3")
    assert json.loads((run / "result.json").read_text())["status"] == "planned"  # nothing changed

    out = run_cli("resume", str(run), "--gpus", "0,1,2,3", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    argv = _server_argv(run)
    assert argv[argv.index("--tp-size") + 1] == "4", argv  # TP follows the GPUs given now, not the plan's 8
    assert "TP=${TP:-4}" in (run / "serve_baseline.sh").read_text()  # the scripts were written again for them
    job = json.loads((run / "jobs" / "serve-baseline" / "job.json").read_text())
    assert job["gpus"] == [0, 1, 2, 3], job
