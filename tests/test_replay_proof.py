"""Replay is a proof: edit any decision a run recorded and the replay diverges, naming that event.

Runs: the two goldens (tests/make_golden.py) and a real campaign killed with SIGKILL mid-tuning and
resumed (on the doubles of tests/campaign_fixtures.py), so every decision-bearing event type is
met: run_started, run_resumed, run_finished, node_started/node_finished, tool_call and tool_result
(steps, and the LLM's tools), artifact_written, progress, llm_request and llm_response. Each
edit is made in a copy; the untouched runs replay to exit 0 (tests/conftest.py checks every run).
"""
from __future__ import annotations

import json
import shutil
import signal
import threading
from pathlib import Path

import pytest

from agent.replay.checker import DecisionChecker, ReplayDivergence
from agent.exit_codes import ExitCode
from agent.replay.driver import replay_run
from agent.replay.frontier import Frontier, ReplayCut
from agent.replay.record import classify, load_recording
from tests.campaign_fixtures import campaign_args, campaign_env
from tests.cli_helpers import only_run, run_cli, start_agent, wait_for
from tests.slowdown import limit

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(scope="module")
def resumed_run(tmp_path_factory, sglang_wheel_root) -> Path:
    root = tmp_path_factory.mktemp("resumed")
    env = campaign_env(root, unit_s=0.3)
    proc = start_agent(*campaign_args(root, sglang_wheel_root), cwd=root, env=env)
    wait_for(lambda: (root / "runs").exists() and list((root / "runs").glob("*/jobs/tune-gpu1/wrapper.json")), 120,
             "the tuning jobs to run")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=limit(10))
    out = run_cli("resume", "latest", cwd=root, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    return only_run(root)


def _edit(event: dict) -> dict:
    """The same event with one decision-bearing field changed."""
    kind = event["type"]
    if kind == "run_started":
        return {**event, "goal": event["goal"] + " and more"}
    if kind == "run_resumed":
        return {**event, "after": "finished" if event.get("after") != "finished" else "failed"}
    if kind == "run_finished":
        return {**event, "status": "failed" if event["status"] != "failed" else "finished"}
    if kind in ("node_started", "node_finished"):
        return {**event, "node": event["node"] + "_x"}
    if kind == "tool_call":
        return {**event, "args": {**event.get("args", {}), "edited": 1}}
    if kind == "tool_result" and "EAGLE" in event.get("summary", ""):
        return {**event, "summary": event["summary"].replace("EAGLE", "NGRAM")}  # the issue's own tamper
    if kind == "tool_result":
        return {**event, "summary": event.get("summary", "") + " (edited)"}
    if kind == "artifact_written":
        return {**event, "path": event["path"] + ".edited"}
    if kind == "progress":
        return {**event, "message": event["message"] + " (edited)"}
    if kind == "llm_request":
        return {**event, "tools": [*event.get("tools", []), "launch_missiles"]}
    if kind == "llm_response":
        message = event["message"]
        calls = [{**c, "function": {**c["function"], "arguments": c["function"]["arguments"].replace("infer_mtp", "sync")}}
                 for c in message.get("tool_calls") or []]
        return {**event, "message": {**message, "tool_calls": calls, "content": (message.get("content") or "") + "!"}}
    if kind == "checkpoint_saved":
        return {**event, "step": (event.get("step") or 0) + 100}
    if kind == "error":
        return {**event, "message": event["message"] + " (edited)"}
    raise AssertionError(f"no edit for {kind}")


def _cases(run: Path) -> list[tuple[str, int]]:
    """(type, seq) of the first decision of each type, plus the infer_mtp step's result."""
    events = [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]
    decisions = classify(events)[0]
    picked: dict[str, int] = {}
    for event in decisions:
        picked.setdefault(f"{event['type']}/{event['lane'] == 'llm'}", event["seq"])
        if event["type"] == "tool_result" and event.get("tool") == "infer_mtp":
            picked["tool_result/infer_mtp"] = event["seq"]
    return sorted(picked.items())


def _tampered(run: Path, seq: int, tmp_path: Path) -> Path:
    copy = tmp_path / "copy" / run.name
    shutil.copytree(run, copy)
    lines = (copy / "trace.jsonl").read_text().splitlines()
    lines[seq] = json.dumps(_edit(json.loads(lines[seq])))
    (copy / "trace.jsonl").write_text("\n".join(lines) + "\n")
    return copy


def _check_every_type(run: Path, tmp_path: Path, required: set[str]) -> None:
    cases = _cases(run)
    assert required <= {name.split("/")[0] for name, _ in cases}, cases
    for number, (name, seq) in enumerate(cases):
        report = replay_run(_tampered(run, seq, tmp_path / str(number)))
        assert report.exit_code == ExitCode.FAILED, f"editing {name} #{seq} went unnoticed:\n{report.render()}"
        assert report.divergence is not None and report.divergence.expected["seq"] == seq, (name, report.render())
        assert f"recorded event #{seq} " in report.render()


def test_every_decision_of_the_playbook_golden_is_checked(tmp_path):
    _check_every_type(GOLDEN / "playbook-mtp-tune", tmp_path, {
        "run_started", "run_finished", "node_started", "node_finished", "tool_call", "tool_result",
        "artifact_written", "progress"})


def test_every_decision_of_the_llm_golden_is_checked(tmp_path):
    _check_every_type(GOLDEN / "llm-mtp", tmp_path, {"llm_request", "llm_response", "tool_call", "tool_result"})


def test_every_decision_of_a_killed_and_resumed_run_is_checked(resumed_run, tmp_path):
    _check_every_type(resumed_run, tmp_path, {"run_started", "run_resumed", "run_finished", "tool_result"})


def test_a_divergence_cuts_the_lanes_held_at_the_frontier_at_once():
    """A lane of a killed attempt waits at the frontier while the other lane diverges: the graph lets the
    divergence out only once every lane of the superstep ended, so the held lane must be cut then, not
    after FREEZE_LIMIT_S (a tampered resumed run took 2 minutes to say "diverged")."""
    recording = load_recording(GOLDEN / "playbook-mtp-tune")
    frontier = Frontier()
    frontier.arm(True, lambda: None)
    checker = DecisionChecker(recording, frontier)
    checker.begin(0)
    ended: list[str] = []

    def held_lane():
        try:
            frontier.freeze("research step infer_mtp", lambda: False)
        except ReplayCut as cut:
            ended.append(str(cut))

    lane = threading.Thread(target=held_lane)
    lane.start()
    wait_for(lambda: frontier.held, 30, "the lane to be held")
    first = classify(recording.events)[0][0]
    with pytest.raises(ReplayDivergence):
        checker.observe(_edit(first))
    lane.join(60)
    assert ended == ["the recorded agent stopped before research step infer_mtp"]  # cut, not timed out
