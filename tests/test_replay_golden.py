"""Replay against the committed golden runs (made by tests/make_golden.py with the real campaign).

Edited, truncated and corrupt traces are made from copies of the goldens in a temp dir.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent.replay.checker import DecisionChecker, ReplayDivergence, ReplayStop
from agent.exit_codes import ExitCode
from agent.replay.driver import replay_run
from agent.replay.record import RecordError, classify, load_recording
from agent.run.trace import TraceError, read_trace
from tests.cli_helpers import run_cli
from tests.messages import assert_refusal

GOLDEN = Path(__file__).parent / "golden"
NAMES = ["playbook-mtp-tune", "llm-mtp"]


def _copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(GOLDEN / name, dest)
    return dest


def _lines(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]


def _write(run: Path, events: list[dict]) -> None:
    (run / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


@pytest.mark.parametrize("name", NAMES)
def test_replay_reproduces_golden(name):
    report = replay_run(GOLDEN / name)
    assert report.divergence is None, report.render()
    assert report.exit_code == ExitCode.DONE
    assert report.matched == report.total > 10
    assert report.plan_same is True
    assert report.uses_llm == (name == "llm-mtp")


def test_edited_step_arguments_diverge_at_that_event(tmp_path):
    run = _copy("playbook-mtp-tune", tmp_path)
    events = _lines(run)
    target = next(e for e in events if e["type"] == "tool_call" and e["tool"] == "benchmark" and e["lane"] == "gpu")
    target["args"] = {"concurrency": [4]}
    _write(run, events)
    report = replay_run(run)
    assert report.exit_code == ExitCode.FAILED
    assert report.divergence.expected["seq"] == target["seq"]
    text = report.render()
    assert f"recorded event #{target['seq']} (line {target['seq'] + 1}, lane gpu, tool_call)" in text
    assert 'args: expected {"concurrency": [4]}, got {}' in text


def test_edited_llm_request_diverges_at_that_event(tmp_path):
    run = _copy("llm-mtp", tmp_path)
    events = _lines(run)
    target = next(e for e in events if e["type"] == "llm_request")
    target["tools"] = [*target["tools"], "launch_missiles"]
    _write(run, events)
    report = replay_run(run)
    assert report.exit_code == ExitCode.FAILED
    assert report.divergence.expected["seq"] == target["seq"]
    assert report.divergence.lane == "llm"
    assert "launch_missiles" in report.render() and "tools: expected" in report.render()


def test_truncated_trace_replays_up_to_the_torn_line(tmp_path):
    run = _copy("playbook-mtp-tune", tmp_path)
    raw = (run / "trace.jsonl").read_bytes()
    lines = raw.split(b"\n")
    keep = len(lines) * 2 // 3
    (run / "trace.jsonl").write_bytes(b"\n".join(lines[:keep]) + b"\n" + lines[keep][:25])
    recording = load_recording(run)
    assert len(recording.events) == keep
    report = replay_run(run)
    assert report.exit_code == ExitCode.CUT_SHORT, report.render()
    assert report.divergence is None
    assert f"line {keep + 1} is torn" in report.stopped
    assert f"the record ends after event #{keep - 1}" in report.stopped
    good_decisions = len(classify(recording.events)[0])
    assert 0 < report.matched <= good_decisions


def test_corrupt_line_replays_up_to_it(tmp_path):
    run = _copy("llm-mtp", tmp_path)
    lines = (run / "trace.jsonl").read_text().splitlines()
    bad = 20
    lines[bad] = '{"v": 1, "seq": 20, "lane": "gpu", "ty'  # a line broken in the middle of the file
    (run / "trace.jsonl").write_text("\n".join(lines) + "\n")
    report = replay_run(run)
    assert report.exit_code == ExitCode.CUT_SHORT, report.render()
    assert f"line {bad + 1} is not JSON" in report.stopped
    assert "the record ends after event #19" in report.stopped
    with pytest.raises(TraceError, match=f"line {bad + 1} is not JSON"):
        read_trace(run / "trace.jsonl")  # resume refuses what replay reads up to


def test_newer_trace_version_is_refused_with_the_fix(tmp_path):
    run = _copy("playbook-mtp-tune", tmp_path)
    _write(run, [{**e, "v": 99} for e in _lines(run)])
    with pytest.raises(RecordError, match="v99 was written by a newer dsv4-agent.*upgrade"):
        load_recording(run)
    with pytest.raises(TraceError, match="line 1: trace format v99 .*upgrade dsv4-agent"):
        read_trace(run / "trace.jsonl")
    done = run_cli("replay", str(run), cwd=tmp_path)
    assert_refusal(done, "v99", "upgrade dsv4-agent")


def test_checker_reports_an_extra_event_and_a_missing_one():
    recording = load_recording(GOLDEN / "playbook-mtp-tune")
    decisions = classify(recording.events)[0]
    checker = DecisionChecker(recording)
    for event in decisions[:-1]:
        checker.observe(event)
    missing = checker.finish()
    assert missing is not None and missing.expected["seq"] == decisions[-1]["seq"]
    assert "was not reproduced" in missing.describe()
    checker = DecisionChecker(recording)
    for event in decisions:
        checker.observe(event)
    with pytest.raises(ReplayDivergence, match="does not have in lane control"):
        checker.observe({**decisions[-1], "seq": 999})
    assert checker.finish() is not None


def test_checker_stops_at_end_of_a_cut_record(tmp_path):
    run = _copy("playbook-mtp-tune", tmp_path)
    _write(run, _lines(run)[:5])
    recording = load_recording(run)
    checker = DecisionChecker(recording)
    for event in classify(recording.events)[0]:
        checker.observe(event)
    with pytest.raises(ReplayStop, match="without run_finished"):
        checker.observe(classify(_lines(GOLDEN / "playbook-mtp-tune"))[0][5])


def test_replay_command_with_timeline(tmp_path):
    run = _copy("playbook-mtp-tune", tmp_path)
    done = run_cli("replay", str(run), "--timeline", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reproduced: all" in done.stdout
    assert "research under GPU work:" in done.stdout and "critical path: preflight" in done.stdout
    assert (run / "timeline.png").stat().st_size > 1000
    assert "<h2>Timeline</h2>" in (run / "report.html").read_text()
