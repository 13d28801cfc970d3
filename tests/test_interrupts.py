"""Ctrl-C pressed twice, 20-50 ms apart, at the worst moments of a real campaign (on the doubles of
tests/campaign_fixtures.py): the agent stops at once with ``interrupted`` and exit 130, installs
nothing after the first signal, and leaves a trace whose sequence numbers are whole."""
from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from agent.run.trace import read_trace
from tests.campaign_fixtures import campaign_args, campaign_env, hold_tuning
from tests.cli_helpers import only_run, run_cli, start_agent, wait_for
from tests.slowdown import limit


def _trace_text(root: Path) -> str:
    traces = list((root / "runs").glob("*/trace.jsonl")) if (root / "runs").exists() else []
    return traces[0].read_text(errors="replace") if traces else ""


def _config_folder(root: Path) -> Path:
    return root / "sglang-checkout" / "python" / "sglang" / "kernels" / "ops" / "gemm" / "configs"


def _folder_state(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _ctrl_c_twice(proc, gap_s: float) -> float:
    first = time.time()
    proc.send_signal(signal.SIGINT)
    time.sleep(gap_s)
    proc.send_signal(signal.SIGINT)
    return first


def _check_stopped(proc, run: Path) -> None:
    output, _ = proc.communicate(timeout=limit(60))
    assert proc.returncode == 130, output
    assert "Traceback" not in output, output
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "interrupted", result
    events = read_trace(run / "trace.jsonl").events
    assert [e["seq"] for e in events] == list(range(len(events)))  # no duplicate, no gap
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "interrupted"


@pytest.mark.parametrize("gap_s", [0.02, 0.035, 0.05])
def test_ctrl_c_twice_while_tuning_stops_now_and_installs_nothing(tmp_path, sglang_wheel_root, gap_s):
    args = campaign_args(tmp_path, sglang_wheel_root, "tune kernels")
    before = _folder_state(_config_folder(tmp_path))
    hold_env, hold = hold_tuning(tmp_path)  # the jobs are still tuning at the Ctrl+C, however slow the machine
    proc = start_agent(*args, cwd=tmp_path, env={**campaign_env(tmp_path, unit_s=0.05), **hold_env})
    wait_for(lambda: _trace_text(tmp_path).count('"type": "job_launched", "key": "tune-gpu') >= 2, 120,
             "the tuning jobs to start")
    _ctrl_c_twice(proc, gap_s)
    run = only_run(tmp_path)
    _check_stopped(proc, run)
    hold.unlink()
    for key in ("tune-gpu0", "tune-gpu1"):  # the detached jobs run to their end; the agent is gone
        wait_for(lambda key=key: (run / "jobs" / key / "exit.json").exists(), 120, f"{key} to end")
    time.sleep(1.0)
    assert not (run / "tuning" / "manifest.json").exists()
    assert _folder_state(_config_folder(tmp_path)) == before

    out = run_cli("resume", "latest", cwd=tmp_path, env=campaign_env(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr  # and the run is resumable as ever
    assert json.loads((run / "result.json").read_text())["status"] == "finished"


@pytest.mark.parametrize("gap_s", [0.02, 0.05])
def test_ctrl_c_twice_as_the_tuning_ends_installs_nothing_after_the_first(tmp_path, sglang_wheel_root, gap_s):
    args = campaign_args(tmp_path, sglang_wheel_root, "tune kernels")
    folder = _config_folder(tmp_path)
    proc = start_agent(*args, cwd=tmp_path, env=campaign_env(tmp_path, unit_s=0.1))
    wait_for(lambda: _trace_text(tmp_path).count('"type": "job_finished", "key": "tune-gpu') >= 2, 120,
             "the tuning jobs to end (the install comes next)")
    first = _ctrl_c_twice(proc, gap_s)
    run = only_run(tmp_path)
    output, _ = proc.communicate(timeout=limit(60))
    assert proc.returncode in (0, 130), output  # the run may have finished before the signal
    assert "Traceback" not in output, output
    events = read_trace(run / "trace.jsonl").events
    assert [e["seq"] for e in events] == list(range(len(events)))
    # The agent takes a signal a moment after it is sent (its main thread runs the handler): an install
    # may begin in between. What must hold is that none begins after the agent took it, as it records.
    finished = next(e for e in reversed(events) if e["type"] == "run_finished")
    assert (finished["status"] == "interrupted") == (proc.returncode == 130), finished
    taken = finished["signal_at"] if finished["status"] == "interrupted" else float("inf")
    assert taken >= first, finished
    manifest = run / "tuning" / "manifest.json"
    if manifest.exists():  # installed before the first signal was taken, never after it
        recorded = json.loads(manifest.read_text())
        assert recorded["created_at"] < taken and recorded["state"] == "installed", recorded
    else:
        assert not [p for p in folder.iterdir() if p.stat().st_mtime >= first]


def test_a_lane_that_ends_after_the_graph_unwound_leaves_no_traceback(caplog):
    """LangGraph wakes from waiting on a superstep's lanes before their done-callbacks ran, then closes its
    executor; a lane that ends in that moment (after another lane's error or Ctrl-C) fails to record its
    writes in the callback, which concurrent.futures logs as a traceback over the user's terminal. The
    campaign drops exactly that record (agent/campaign/interrupts.py), and nothing else."""
    from concurrent.futures import Future, ThreadPoolExecutor

    from agent.campaign.interrupts import _quiet_late_lane_writes

    _quiet_late_lane_writes()
    closed = ThreadPoolExecutor(1)
    closed.shutdown()
    late, broken = Future(), Future()
    late.add_done_callback(lambda _: closed.submit(print))  # the late lane's writes, as LangGraph submits them

    def fails(_):
        raise ValueError("a real bug in a callback")

    broken.add_done_callback(fails)
    with caplog.at_level("ERROR", logger="concurrent.futures"):
        late.set_result(None)
        broken.set_result(None)
    logged = [str(r.exc_info[1]) for r in caplog.records if r.exc_info]
    assert logged == ["a real bug in a callback"]  # the late write is dropped; any other error still shows


def test_an_install_let_through_before_the_signal_is_dated_before_it(tmp_path, monkeypatch):
    """The gate lets an install through; the signal is taken while the install still validates its
    files. The manifest's created_at (when the install began) must come before the signal_at the run
    records, whatever happens in between: the promise a user and the tests read off the trace."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from agent.campaign.interrupts import SignalWatch
    from tools import stop
    from tests.tuning_fixtures import triton_config
    from tools.tuning import host_install
    from tools.tuning.configs import config_file_name
    from tools.tuning.install import install_configs

    configs = tmp_path / "configs"
    configs.mkdir()
    merged = tmp_path / "run" / "tuning" / "merged"
    merged.mkdir(parents=True)
    name = config_file_name(512, 1024, "NVIDIA H200")
    (merged / name).write_text(json.dumps({"1": triton_config(1)}))
    through, taken = threading.Event(), threading.Event()
    check = host_install.check_config

    def check_after_the_signal(path):  # the install is past the gate; it validates once the signal was taken
        through.set()
        assert taken.wait(limit(30))
        return check(path)

    monkeypatch.setattr(host_install, "check_config", check_after_the_signal)
    watch = SignalWatch()
    try:
        with ThreadPoolExecutor(1) as pool:
            installing = pool.submit(install_configs, [merged / name], configs, tmp_path / "run")
            assert through.wait(limit(30))
            watch.inject("SIGINT")
            taken.set()
            manifest = installing.result(timeout=limit(60))
    finally:
        stop.reset()  # the gate is process-wide
    assert manifest.state == "installed" and (configs / name).exists()
    assert manifest.created_at < watch.first_at, (manifest.created_at, watch.first_at)
