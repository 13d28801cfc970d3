"""What a crash leaves in a run folder, met by every command: a trace torn inside a UTF-8 character,
garbage bytes at its end, a lost line, or no trace at all (killed right after config.json).

Each case starts from a real campaign killed with SIGKILL (on the doubles of tests/campaign_fixtures.py);
the bytes a crash could leave are then written into the trace as raw bytes. ``status``, ``replay``
and ``resume`` must name the problem without crashing, ``resume`` must record what it cut off, and
no good event may be lost.
"""
from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest

from agent.exit_codes import ExitCode
from agent.run.trace import read_trace
from tests.campaign_fixtures import campaign_args, campaign_env, hold_tuning
from tests.cli_helpers import only_run, run_cli, start_agent, wait_for
from tests.messages import assert_finished_refused
from tests.slowdown import limit

GOAL = "tune kernels"


def _killed_run(root: Path, wheel_root: Path) -> Path:
    proc = start_agent(*campaign_args(root, wheel_root, GOAL), cwd=root, env=campaign_env(root, unit_s=0.4))
    wait_for(lambda: (root / "runs").exists() and list((root / "runs").glob("*/jobs/tune-gpu1/wrapper.json")), 120,
             "the tuning jobs to run")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=limit(10))
    return only_run(root)


def _events(run: Path) -> list[dict]:
    return read_trace(run / "trace.jsonl").events


TORN_UTF8 = '{"v": 1, "seq": 99, "type": "progress", "message": "GPU 0: 3/4 units — é'.encode()[:-1]  # cut inside é
GARBAGE = b"\xff\xfe\xfd\x00 not an event \x80\n"


@pytest.mark.parametrize("tail, why", [(TORN_UTF8, "torn"), (GARBAGE, "not UTF-8")])
def test_a_bad_tail_is_named_by_every_command_and_resume_records_cutting_it(tmp_path, sglang_wheel_root, tail, why):
    run = _killed_run(tmp_path, sglang_wheel_root)
    good = _events(run)
    with open(run / "trace.jsonl", "ab") as f:
        f.write(tail)
    env = campaign_env(tmp_path, unit_s=0.4)

    status = run_cli("status", "latest", cwd=tmp_path, env=env)
    assert status.returncode == 0, status.stderr
    assert f"trace: {len(good)} events" in status.stdout and why in status.stdout

    replay = run_cli("replay", "latest", cwd=tmp_path, env=env)
    assert replay.returncode == ExitCode.CUT_SHORT, replay.stdout + replay.stderr  # reproduced up to there
    assert why in replay.stdout and "Traceback" not in replay.stderr

    resumed = run_cli("resume", "latest", cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "cut off what the crash left at the end of the trace" in resumed.stdout
    after = _events(run)
    assert after[: len(good)] == good  # no event lost
    assert [e["seq"] for e in after] == list(range(len(after)))
    note = next(e for e in after if e["type"] == "run_resumed")
    assert note["dropped_tail"]["bytes"] == len(tail) and why in note["dropped_tail"]["why"]
    assert read_trace(run / "trace.jsonl").warning is None
    assert json.loads((run / "result.json").read_text())["status"] == "finished"


@pytest.mark.no_replay("a trace line is deleted on purpose: the record has lost an event")
def test_a_sequence_gap_is_reported_by_status_and_resume(tmp_path, sglang_wheel_root):
    run = _killed_run(tmp_path, sglang_wheel_root)
    lines = (run / "trace.jsonl").read_bytes().split(b"\n")
    lost = json.loads(lines[3])["seq"]
    (run / "trace.jsonl").write_bytes(b"\n".join(lines[:3] + lines[4:]))  # one line lost in the middle
    env = campaign_env(tmp_path, unit_s=0.4)
    status = run_cli("status", "latest", cwd=tmp_path, env=env)
    assert f"after seq {lost - 1} comes seq {lost + 1} (1 event missing)" in status.stdout, status.stdout
    resumed = run_cli("resume", "latest", cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "sequence gap" in resumed.stdout
    note = next(e for e in _events(run) if e["type"] == "run_resumed")
    assert note["seq_gaps"] == [f"after seq {lost - 1} comes seq {lost + 1} (1 event missing)"]


def test_a_run_killed_before_its_first_trace_event_is_resumed_from_the_start(tmp_path, sglang_wheel_root):
    run = _killed_run(tmp_path, sglang_wheel_root)
    stopped = run_cli("jobs", "latest", "--stop", "all", cwd=tmp_path, env=campaign_env(tmp_path, unit_s=0.05))
    assert stopped.returncode == 0, stopped.stderr
    # What a kill in the instant after config.json (and before trace.jsonl) leaves: config.json and the lock.
    for item in run.iterdir():
        if item.name not in ("config.json", ".lock"):
            shutil.rmtree(item) if item.is_dir() else item.unlink()
    env = campaign_env(tmp_path, unit_s=0.05)
    status = run_cli("status", "latest", cwd=tmp_path, env=env)
    assert status.returncode == 0 and "(not finished)" in status.stdout, status.stdout + status.stderr
    resumed = run_cli("resume", "latest", cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "starts from the beginning" in resumed.stdout
    events = _events(run)
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"
    assert json.loads((run / "result.json").read_text())["status"] == "finished"


def test_a_kill_between_run_finished_and_result_json_is_completed_by_resume(tmp_path, sglang_wheel_root):
    """The trace says the attempt ended; result.json was not written yet. resume writes it (as the
    dying agent would have) instead of running the attempt again, so the run replays as recorded."""
    run = _killed_run(tmp_path, sglang_wheel_root)
    env = campaign_env(tmp_path, unit_s=0.05)
    finished = run_cli("resume", "latest", cwd=tmp_path, env=env)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    before = json.loads((run / "result.json").read_text())
    (run / "result.json").unlink()
    events_before = _events(run)
    again = run_cli("resume", "latest", cwd=tmp_path, env=env)
    assert_finished_refused(again, run.name)
    after = json.loads((run / "result.json").read_text())
    assert {k: after[k] for k in ("status", "summary", "steps")} == {k: before[k] for k in ("status", "summary", "steps")}
    assert _events(run) == events_before  # nothing ran again
    replayed = run_cli("replay", str(run), cwd=tmp_path, env=env)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_a_lane_that_finished_before_the_kill_runs_again_on_resume(tmp_path, sglang_wheel_root):
    """The research lane ends and LangGraph saves its writes, then the agent is killed while tuning. Whether
    a kill lands before or after that save cannot be seen in the trace, so resume runs the whole superstep
    again either way (and the suite's replay check reproduces it)."""
    import sqlite3

    hold_env, hold = hold_tuning(tmp_path)  # the GPU lane is still tuning when the research lane has ended
    proc = start_agent(*campaign_args(tmp_path, sglang_wheel_root, GOAL), cwd=tmp_path,
                       env={**campaign_env(tmp_path, unit_s=0.05), **hold_env})

    def research_saved() -> bool:
        runs = list((tmp_path / "runs").glob("*/checkpoint.sqlite")) if (tmp_path / "runs").exists() else []
        if not runs or not any(e["type"] == "node_finished" and e.get("node") == "research_lane"
                               for e in _events(runs[0].parent)):
            return False
        with sqlite3.connect(runs[0]) as db:
            return db.execute("SELECT count(*) FROM writes").fetchone()[0] > 0

    wait_for(research_saved, 120, "the research lane's writes in the checkpoint")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=limit(10))
    hold.unlink()
    run = only_run(tmp_path)
    resumed = run_cli("resume", str(run), cwd=tmp_path, env=campaign_env(tmp_path))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = _events(run)
    start = next(i for i, e in enumerate(after) if e["type"] == "run_resumed")
    assert any(e["type"] == "node_started" and e.get("node") == "research_lane" for e in after[start:])
