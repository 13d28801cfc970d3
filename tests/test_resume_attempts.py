"""Failures that used to leave a run stuck, each reproduced with real processes and then resumed.

A job is what it measures, serves or tunes (tools/jobs/attempts.py): a bench client that crashed,
a host crash that killed the agent, the server and the client, a resume from another folder by
absolute path, tuning jobs that failed twice, a job someone stopped. In every case ``resume``
either finishes the run or says how to retry, never runs a job twice and never loses a result.
The campaign runs on the doubles of tests/campaign_fixtures.py.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
from collections import Counter
from pathlib import Path

from tests.campaign_fixtures import campaign_args, campaign_env, hold_tuning
from tests.cli_helpers import only_run, run_cli, start_agent, wait_for
from tests.messages import assert_refusal
from tests.own_processes import group_members_since
from tests.slowdown import limit

BENCH_GOAL = "benchmark baseline"
TAGS = ("baseline-c1", "baseline-c2")


def _env(root: Path, **extra: str) -> dict:
    return {**campaign_env(root), "DSV4_DOUBLE_BENCH_CALLS": str(root / "bench_calls.txt"), **extra}


def _result(run: Path) -> dict:
    return json.loads((run / "result.json").read_text())


def _result_lines(run: Path) -> Counter:
    lines = (run / "bench" / "baseline.jsonl").read_text().splitlines()
    return Counter(json.loads(line)["tag"] for line in lines)


def _client_runs(root: Path) -> Counter:
    return Counter((root / "bench_calls.txt").read_text().split())


def _called(root: Path, tag: str) -> bool:
    calls = root / "bench_calls.txt"
    return calls.exists() and tag in calls.read_text().split()


def _attempt_folders(run: Path, base: str) -> list[str]:
    return sorted(p.name for p in (run / "jobs").iterdir() if p.name == base or p.name.startswith(base + "-a"))


def _running(run: Path, key: str) -> bool:
    folder = run / "jobs" / key
    return (folder / "wrapper.json").exists() and not (folder / "exit.json").exists()


def _hold(root: Path) -> Path:
    """The server double's hold file (DSV4_DOUBLE_HOLD_FILE): requests wait while it exists."""
    hold = root / "hold-requests"
    hold.touch()
    return hold


def _first_client_running(root: Path) -> Path:
    """The run, once the first point's bench client itself has started (it writes bench_calls.txt first
    thing), not only its wrapper: a crash before the client ran would leave nothing to measure twice."""
    run = wait_for(lambda: next(iter((root / "runs").glob("*/jobs")), None) and only_run(root), 60, "the run")
    wait_for(lambda: _running(run, "bench-baseline-c1") and _called(root, "baseline-c1"), 120,
             "the first bench client to run")
    return run


def _kill_job(run: Path, key: str) -> None:
    """SIGKILL both process groups of a job (its wrapper's and its command's), as a host crash would.
    Both are read from wrapper.json, which the wrapper itself writes: the agent's launch.json may never
    have been written, if the crash came between starting the wrapper and recording it."""
    wrapper = json.loads((run / "jobs" / key / "wrapper.json").read_text())
    for group, leader_start in ((wrapper["child_pgid"], wrapper["child_start_time"]),
                                (wrapper["pid"], wrapper["start_time"])):  # the wrapper leads its own session
        for pid in group_members_since(group, leader_start):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_bench_client_that_crashed_once_is_measured_by_resume(tmp_path, sglang_wheel_root):
    env = _env(tmp_path, DSV4_DOUBLE_BENCH_CRASH_ONCE=str(tmp_path / "crashed"))
    out = run_cli(*campaign_args(tmp_path, sglang_wheel_root, BENCH_GOAL, concurrency="1,2"), cwd=tmp_path, env=env)
    run = only_run(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr  # a point is missing: the run is not finished
    assert _result(run)["steps"]["benchmark"] == "failed"
    assert "resume" in json.loads((run / "steps" / "benchmark.json").read_text())["summary"]

    again = run_cli("resume", "latest", cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert _result(run)["status"] == "finished"
    assert _result_lines(run) == Counter(TAGS)  # every point measured once
    assert _attempt_folders(run, "bench-baseline-c1") == ["bench-baseline-c1", "bench-baseline-c1-a2"]
    assert _attempt_folders(run, "bench-baseline-c2") == ["bench-baseline-c2"]  # finished: not redone
    assert _client_runs(tmp_path) == Counter({"baseline-c1": 2, "baseline-c2": 1})
    assert _attempt_folders(run, "serve-baseline") == ["serve-baseline", "serve-baseline-a2"]


def test_after_a_host_crash_resume_starts_a_fresh_server_and_measures_again(tmp_path, sglang_wheel_root):
    hold = _hold(tmp_path)  # the first point stays open until the host has gone down inside it
    env = _env(tmp_path, DSV4_DOUBLE_HOLD_FILE=str(hold))
    proc = start_agent(*campaign_args(tmp_path, sglang_wheel_root, BENCH_GOAL, concurrency="1,2"), cwd=tmp_path, env=env)
    run = _first_client_running(tmp_path)
    proc.send_signal(signal.SIGKILL)  # the host goes down: agent, server and client together
    proc.wait(timeout=limit(10))
    _kill_job(run, "bench-baseline-c1")
    _kill_job(run, "serve-baseline")
    hold.unlink()
    old_port = json.loads((run / "jobs" / "serve-baseline" / "job.json").read_text())["argv"]

    out = run_cli("resume", "latest", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert _result(run)["status"] == "finished"
    assert _result_lines(run) == Counter(TAGS)
    new_port = json.loads((run / "jobs" / "serve-baseline-a2" / "job.json").read_text())["argv"]
    assert old_port != new_port  # a fresh server on a fresh port serves the same variant
    assert _attempt_folders(run, "bench-baseline-c1") == ["bench-baseline-c1", "bench-baseline-c1-a2"]
    assert _client_runs(tmp_path) == Counter({"baseline-c1": 2, "baseline-c2": 1})
    events = [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in events] == list(range(len(events)))
    retried = [e for e in events if e.get("key") == "bench-baseline-c1-a2" and e["type"] == "progress"]
    assert retried and retried[0]["retry_of"] == "bench-baseline-c1" and retried[0]["attempt"] == 2


def test_resume_by_absolute_path_from_another_folder_reattaches_and_takes_the_after_snapshot(tmp_path,
                                                                                          sglang_wheel_root):
    hold = _hold(tmp_path)  # the first point stays open until the agent has died inside it
    env = _env(tmp_path, DSV4_DOUBLE_HOLD_FILE=str(hold))
    proc = start_agent(*campaign_args(tmp_path, sglang_wheel_root, BENCH_GOAL, concurrency="1,2"), cwd=tmp_path, env=env)
    run = _first_client_running(tmp_path)
    proc.send_signal(signal.SIGKILL)  # the agent alone dies; server and client run on
    proc.wait(timeout=limit(10))
    hold.unlink()
    wait_for(lambda: (run / "jobs" / "bench-baseline-c1" / "exit.json").exists(), 120,
             "the point to finish while the agent is away")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    out = run_cli("resume", str(run.resolve()), cwd=elsewhere, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert _result(run)["status"] == "finished"
    assert _result_lines(run) == Counter(TAGS)
    assert _client_runs(tmp_path) == Counter(TAGS)  # the running client was re-attached, not run again
    assert _attempt_folders(run, "serve-baseline") == ["serve-baseline"]
    snaps = [json.loads(line) for line in (run / "bench" / "snapshots" / "baseline.jsonl").read_text().splitlines()]
    assert [(s["tag"], s["phase"]) for s in snaps] == [("baseline-c1", "before"), ("baseline-c1", "after"),
                                                      ("baseline-c2", "before"), ("baseline-c2", "after")]
    assert not (elsewhere / "runs").exists()


def _broken_tuner(root: Path) -> Path:
    script = root / "sglang-checkout" / "benchmark/kernels/quantization/tuning_block_wise_kernel.py"
    good = script.read_text()
    script.write_text(good.replace("    _maybe_crash()\n", "    raise RuntimeError('CUDA out of memory (double)')\n"))
    return script


def test_tuning_that_failed_twice_is_tried_again_by_resume_then_only_on_request(tmp_path, sglang_wheel_root):
    args = campaign_args(tmp_path, sglang_wheel_root, "tune kernels")
    script = _broken_tuner(tmp_path)
    out = run_cli(*args, cwd=tmp_path, env=_env(tmp_path))
    run = only_run(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert _attempt_folders(run, "tune-gpu0") == ["tune-gpu0", "tune-gpu0-a2"]  # one retry per agent run

    third = run_cli("resume", "latest", cwd=tmp_path, env=_env(tmp_path))
    assert third.returncode == 1
    assert _attempt_folders(run, "tune-gpu0") == ["tune-gpu0", "tune-gpu0-a2", "tune-gpu0-a3"]

    fourth = run_cli("resume", "latest", cwd=tmp_path, env=_env(tmp_path))
    assert fourth.returncode == 1
    assert _attempt_folders(run, "tune-gpu0") == ["tune-gpu0", "tune-gpu0-a2", "tune-gpu0-a3"]  # bounded
    summary = json.loads((run / "steps" / "tune_kernels.json").read_text())["summary"]
    assert "3 attempts in a row failed" in summary and "--retry-failed" in summary

    script.write_text(script.read_text().replace("    raise RuntimeError('CUDA out of memory (double)')\n",
                                                 "    _maybe_crash()\n"))
    fixed = run_cli("resume", "latest", "--retry-failed", cwd=tmp_path, env=_env(tmp_path))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert _result(run)["status"] == "finished"
    assert _attempt_folders(run, "tune-gpu0")[-1] == "tune-gpu0-a4"
    calls = Counter((tmp_path / "tune_calls.txt").read_text().splitlines())
    assert calls and max(calls.values()) == 1  # each unit tuned once (the broken attempts tuned none)


def test_a_stopped_job_is_retried_only_on_request(tmp_path, sglang_wheel_root):
    hold_env, hold = hold_tuning(tmp_path)  # tune-gpu0 is still tuning when it is stopped
    env = {**_env(tmp_path), **hold_env}
    proc = start_agent(*campaign_args(tmp_path, sglang_wheel_root, "tune kernels"), cwd=tmp_path, env=env)
    run = wait_for(lambda: next(iter((tmp_path / "runs").glob("*/jobs")), None) and only_run(tmp_path), 60, "the run")
    wait_for(lambda: _running(run, "tune-gpu0"), 120, "tune-gpu0 to run")
    stop = run_cli("jobs", "latest", "--stop", "tune-gpu0", cwd=tmp_path, env=env)
    assert stop.returncode == 0 and "stopped" in stop.stdout, stop.stdout + stop.stderr
    hold.unlink()  # tune-gpu1 goes on
    output, _ = proc.communicate(timeout=limit(240))
    assert proc.returncode == 1, output

    again = run_cli("resume", "latest", cwd=tmp_path, env=env)
    assert again.returncode == 1
    assert "--retry tune-gpu0" in json.loads((run / "steps" / "tune_kernels.json").read_text())["summary"]
    assert _attempt_folders(run, "tune-gpu0") == ["tune-gpu0"]

    asked = run_cli("jobs", "latest", "--retry", "tune-gpu0", cwd=tmp_path, env=env)
    assert asked.returncode == 0 and "retry requested" in asked.stdout, asked.stdout + asked.stderr
    done = run_cli("resume", "latest", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _attempt_folders(run, "tune-gpu0") == ["tune-gpu0", "tune-gpu0-a2"]
    assert _result(run)["status"] == "finished"
    calls = Counter((tmp_path / "tune_calls.txt").read_text().splitlines())
    assert sum(n > 1 for n in calls.values()) <= 1  # only the unit cut off by the stop ran again


def test_jobs_retry_refuses_running_and_succeeded_jobs(tmp_path, sglang_wheel_root):
    out = run_cli(*campaign_args(tmp_path, sglang_wheel_root, "tune kernels"), cwd=tmp_path, env=_env(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    refused = run_cli("jobs", "latest", "--retry", "tune-gpu0", cwd=tmp_path, env=_env(tmp_path))
    assert_refusal(refused, "tune-gpu0", "succeeded", "not redone")
    unknown = run_cli("jobs", "latest", "--retry", "nope", cwd=tmp_path, env=_env(tmp_path))
    assert_refusal(unknown, "job", "'nope'")
