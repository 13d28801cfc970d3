"""A checkpoint whose write-ahead log a crash cut short is named, never resumed from silently.

A real campaign on the doubles (tests/campaign_fixtures.py) is killed with SIGKILL mid-tuning, once the
graph has saved checkpoints; ``checkpoint.sqlite-wal`` (LangGraph's SqliteSaver keeps the database in
WAL mode) is cut to half its size. SQLite reads what is left without complaint, an older state; the
trace records the saves it lost. ``resume`` refuses in one line naming the torn log and
``--rebuild-checkpoint``, which finishes the run, and the replay reproduces it.
"""
from __future__ import annotations

import json
import signal
from collections import Counter

import pytest

from agent.exit_codes import ExitCode
from agent.replay.driver import replay_run
from agent.run.trace import read_trace
from tests.campaign_fixtures import campaign_args, campaign_env, hold_tuning
from tests.cli_helpers import only_run, run_cli, start_agent, wait_for
from tests.messages import assert_refusal
from tests.slowdown import limit

GOAL = "tune kernels"


def _saves(root) -> int:
    traces = list(root.glob("runs/*/trace.jsonl"))
    return traces[0].read_text(errors="replace").count('"type": "checkpoint_saved"') if traces else 0


@pytest.mark.parametrize("keep", ["half", "header"])  # some saves left, or none (cut before the first whole one)
def test_a_torn_write_ahead_log_is_named_and_the_rebuilt_run_replays(tmp_path, sglang_wheel_root, keep):
    held, hold = hold_tuning(tmp_path)
    env = {**campaign_env(tmp_path, unit_s=0.4), **held}
    proc = start_agent(*campaign_args(tmp_path, sglang_wheel_root, GOAL), cwd=tmp_path, env=env)
    wait_for(lambda: list(tmp_path.glob("runs/*/jobs/tune-gpu1/wrapper.json")) and _saves(tmp_path) >= 2, 120,
             "the tuning jobs and two saved checkpoints")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=limit(10))
    hold.unlink()  # the jobs, detached, go on
    run = only_run(tmp_path)
    wal = run / "checkpoint.sqlite-wal"
    assert wal.stat().st_size > 0, "the kill left no write-ahead log"
    with open(wal, "r+b") as f:
        f.truncate(wal.stat().st_size // 2 if keep == "half" else 32)  # 32 bytes: SQLite's WAL header
    trace_before = (run / "trace.jsonl").read_bytes()

    refused = run_cli("resume", str(run), cwd=tmp_path, env=env)
    assert_refusal(refused, run / "checkpoint.sqlite", "checkpoint.sqlite-wal", "--rebuild-checkpoint",
                   "step the run back")
    assert (run / "trace.jsonl").read_bytes() == trace_before and not (run / "result.json").exists()

    rebuilt = run_cli("resume", str(run), "--rebuild-checkpoint", cwd=tmp_path, env=env)
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert json.loads((run / "result.json").read_text())["status"] == "finished"
    resumed = next(e for e in read_trace(run / "trace.jsonl").events if e["type"] == "run_resumed")
    assert "write-ahead log" in resumed["rebuilt_checkpoint"], resumed
    assert sorted(p.name for p in (run / "jobs").iterdir()) == ["tune-gpu0", "tune-gpu1"]  # never started twice
    calls = Counter((tmp_path / "tune_calls.txt").read_text().splitlines())
    assert calls and max(calls.values()) == 1  # no unit tuned twice
    report = replay_run(run)
    assert report.exit_code == ExitCode.DONE, report.render()


def _saved_in_the_log_alone(tmp_path):
    """What a kill right after the graph's first saves leaves: a real SqliteSaver has saved two checkpoints,
    and its files are copied while the connection is still open (no close, so no fold into the main file)."""
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    from agent.campaign.checkpoints import open_checkpoints

    class State(TypedDict):
        n: int

    live = tmp_path / "live"
    live.mkdir()
    conn, saver = open_checkpoints(live / "checkpoint.sqlite")
    graph = StateGraph(State)
    graph.add_node("preflight", lambda state: {"n": state["n"] + 1})
    graph.add_edge(START, "preflight")
    graph.add_edge("preflight", END)
    config = {"configurable": {"thread_id": "attempt-1"}}
    graph.compile(checkpointer=saver).invoke({"n": 0}, config)
    saved = [c.config["configurable"]["checkpoint_id"] for c in saver.list(config)][::-1]
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    for name in ("checkpoint.sqlite", "checkpoint.sqlite-wal"):
        (crashed / name).write_bytes((live / name).read_bytes())
    conn.close()
    events = [{"type": "run_started"}, {"type": "node_started", "node": "preflight"},
              *({"type": "checkpoint_saved", "checkpoint_id": cid} for cid in saved)]
    return crashed / "checkpoint.sqlite", events


def test_a_log_cut_before_any_node_after_preflight_is_still_named(tmp_path):
    """The CI case: the kill came after two saves but before the node after preflight started, so only the
    trace's saves say a checkpoint is owed; the main file holds no table yet."""
    from agent.campaign.checkpoints import checkpoint_problem

    path, events = _saved_in_the_log_alone(tmp_path)
    assert len([e for e in events if e["type"] == "checkpoint_saved"]) >= 2
    assert checkpoint_problem(path, events) is None  # the log whole: every save is there
    wal = path.with_name("checkpoint.sqlite-wal")
    with open(wal, "r+b") as f:
        f.truncate(32)
    problem = checkpoint_problem(path, events)
    assert problem is not None and "checkpoint.sqlite-wal" in problem and "step the run back" in problem, problem
    wal.unlink()
    path.write_bytes(b"")
    assert checkpoint_problem(path, events) == "is empty"
    path.unlink()
    assert checkpoint_problem(path, events) == "is missing"
    assert checkpoint_problem(path, events[:2]) is None  # nothing saved, nothing committed: a fresh start
