"""trace.jsonl: schema fields, sequence, redaction, torn last line, corruption, concurrency."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from agent.run.trace import TraceError, TraceWriter, read_trace
from agent.run.trace_schema import SCHEMA_VERSION


def test_events_carry_the_schema_fields_and_a_gap_free_sequence(tmp_path: Path):
    w = TraceWriter(tmp_path / "trace.jsonl")
    w.emit("run_started", "control", goal="g", run="r")
    w.emit("job_launched", "gpu", key="tune-gpu0", gpus=[0])
    events = read_trace(tmp_path / "trace.jsonl").events
    assert [e["seq"] for e in events] == [0, 1]
    for e in events:
        assert {"v", "seq", "t", "mono", "pid", "lane", "type"} <= e.keys() and e["v"] == SCHEMA_VERSION
    assert events[1]["lane"] == "gpu" and events[1]["gpus"] == [0]


def test_nothing_is_recorded_after_an_attempt_ends_until_the_next_one_opens(tmp_path: Path):
    """An interrupt records run_finished while a GPU lane may still report its jobs' progress: the
    attempt's record ends there, and the next attempt's run_resumed opens it again, gap-free."""
    w = TraceWriter(tmp_path / "trace.jsonl")
    w.emit("run_started", "control", goal="g", run="r")
    w.emit("run_finished", "control", status="interrupted", summary="interrupted by SIGINT")
    assert w.emit("progress", "gpu", message="GPU 0: 1/18 units tuned") is None
    w.emit("run_resumed", "control", run="r", thread="attempt-2")
    w.emit("progress", "gpu", message="GPU 0: 2/18 units tuned")
    events = read_trace(tmp_path / "trace.jsonl").events
    assert [(e["seq"], e["type"]) for e in events] == [(0, "run_started"), (1, "run_finished"), (2, "run_resumed"),
                                                      (3, "progress")]
    assert events[3]["message"] == "GPU 0: 2/18 units tuned"


def test_unknown_event_type_is_a_programming_error(tmp_path: Path):
    with pytest.raises(ValueError, match="unknown trace event type"):
        TraceWriter(tmp_path / "t.jsonl").emit("made_up")


def test_secrets_never_reach_the_file(tmp_path: Path):
    w = TraceWriter(tmp_path / "trace.jsonl")
    openai_key = "sk-" + "abcdefghijklmnopqrstuvwx"  # built here so no key-shaped literal sits in the repo
    hub_token = "hf_" + "abcdefghijklmnopqrstuvwxyz1234"
    w.emit("llm_request", "llm", api_key=openai_key, headers={"Authorization": "Bearer abcdefghijk"},
           note=f"key {openai_key} and {hub_token} inline")
    text = (tmp_path / "trace.jsonl").read_text()
    assert "sk-abcdefghijklmnop" not in text and "hf_abcdefghij" not in text and "Bearer abcdefghijk" not in text
    assert text.count("[redacted]") == 4


def test_torn_last_line_is_reported_and_dropped_on_resume(tmp_path: Path):
    path = tmp_path / "trace.jsonl"
    w = TraceWriter(path)
    for i in range(3):
        w.emit("progress", "research", message=f"m{i}")
    w.close()
    with open(path, "ab") as f:
        f.write(b'{"v": 1, "seq": 3, "type": "prog')  # the agent died mid-write
    result = read_trace(path)
    assert len(result.events) == 3 and "torn line" in result.warning
    resumed = TraceWriter(path)
    resumed.emit("run_resumed", "control", run="r", thread="attempt-2")
    events = read_trace(path).events
    assert [e["seq"] for e in events] == [0, 1, 2, 3] and events[-1]["type"] == "run_resumed"
    assert read_trace(path).warning is None


def test_corruption_in_the_middle_is_an_error_naming_the_line(tmp_path: Path):
    path = tmp_path / "trace.jsonl"
    good = '{"v": 1, "seq": %d, "type": "progress", "lane": "control", "t": 0, "mono": 0, "pid": 1, "message": "m"}\n'
    path.write_text(good % 0 + "not json at all\n" + good % 2)
    with pytest.raises(TraceError, match="line 2 is not JSON"):
        read_trace(path)


def test_two_lanes_writing_at_once_keep_lines_whole_and_sequence_unique(tmp_path: Path):
    w = TraceWriter(tmp_path / "trace.jsonl")

    def lane(name: str) -> None:
        for i in range(200):
            w.emit("progress", name, message=f"{name} {i} " + "x" * 200)

    threads = [threading.Thread(target=lane, args=(n,)) for n in ("gpu", "research")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = (tmp_path / "trace.jsonl").read_text().splitlines()
    seqs = [json.loads(line)["seq"] for line in lines]
    assert seqs == list(range(400))


def _three_events(path: Path) -> None:
    w = TraceWriter(path)
    for i in range(3):
        w.emit("progress", "research", message=f"m{i} é")  # é: two bytes in UTF-8
    w.close()


def test_a_line_torn_inside_a_multibyte_character_is_a_torn_tail(tmp_path: Path):
    path = tmp_path / "trace.jsonl"
    _three_events(path)
    whole = json.dumps({"v": 1, "seq": 3, "type": "progress", "message": "é"}, ensure_ascii=False).encode()
    cut = whole.index("é".encode()) + 1  # between the two bytes of é
    with open(path, "ab") as f:
        f.write(whole[:cut])
    result = read_trace(path)
    assert len(result.events) == 3 and result.tail is not None and result.tail.size == cut
    assert "torn line" in result.warning
    resumed = TraceWriter(path)
    assert resumed.dropped is not None and resumed.dropped.size == cut
    resumed.emit("progress", "control", message="after")
    assert [e["seq"] for e in read_trace(path).events] == [0, 1, 2, 3] and read_trace(path).warning is None


@pytest.mark.parametrize("garbage, why", [(b"\xff\xfe\x00garbage\n", "not UTF-8"), (b"\x80\x81", "torn"),
                                           (b"not json\n", "not JSON"), (b'{"a": 1}\n', "not a trace event")])
def test_a_garbage_tail_is_reported_and_cut_off_by_the_writer(tmp_path: Path, garbage: bytes, why: str):
    path = tmp_path / "trace.jsonl"
    _three_events(path)
    with open(path, "ab") as f:
        f.write(garbage)
    result = read_trace(path)
    assert len(result.events) == 3 and why in result.warning and result.tail.size == len(garbage)
    TraceWriter(path).emit("progress", "control", message="after")
    assert [e["seq"] for e in read_trace(path).events] == [0, 1, 2, 3]


def test_garbage_in_the_middle_is_corruption_and_nothing_is_cut(tmp_path: Path):
    path = tmp_path / "trace.jsonl"
    _three_events(path)
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([lines[0], b"\xff\xfe bad", *lines[1:]]))
    before = path.read_bytes()
    with pytest.raises(TraceError, match="line 2 is not UTF-8 text"):
        TraceWriter(path)
    assert path.read_bytes() == before


def test_sequence_gaps_and_repeats_are_reported(tmp_path: Path):
    path = tmp_path / "trace.jsonl"
    _three_events(path)
    lines = path.read_text().splitlines()
    events = [json.loads(line) for line in lines]
    events[1]["seq"], events[2]["seq"] = 4, 4
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    problems = read_trace(path).problems
    assert problems == ["trace sequence gap: after seq 0 comes seq 4 (3 events missing)",
                        "trace sequence gap: seq 4 comes again after seq 4 (an event written twice)"]
    w = TraceWriter(path)
    assert w.emit("progress", "control", message="next")["seq"] == 5  # after the highest, never a repeat


def test_a_newer_format_is_refused_and_never_cut_off(tmp_path: Path):
    path = tmp_path / "trace.jsonl"
    path.write_text('{"v": 99, "seq": 0, "type": "progress", "lane": "control", "t": 0, "mono": 0, "pid": 1}\n')
    before = path.read_bytes()
    with pytest.raises(TraceError, match="newer dsv4-agent"):
        TraceWriter(path)
    assert path.read_bytes() == before


def test_emit_refuses_an_event_that_does_not_match_its_model(tmp_path: Path):
    from agent.run.trace_schema import EventError

    w = TraceWriter(tmp_path / "trace.jsonl")
    with pytest.raises(EventError, match="tool_result event: field 'status'"):
        w.emit("tool_result", "gpu", tool="benchmark")
    with pytest.raises(EventError, match="job_launched event: field 'key'"):
        w.emit("job_launched", "gpu", gpus=[0])
    assert (tmp_path / "trace.jsonl").read_bytes() == b""  # nothing half-valid reached the file


def test_counts_named_like_tokens_are_kept_and_tokens_redacted(tmp_path: Path):
    w = TraceWriter(tmp_path / "trace.jsonl")
    event = w.emit("progress", "control", message="m", max_tokens=512, hf_token="x" * 12,
                   flags={"--speculative-num-draft-tokens": "4"})
    assert event["max_tokens"] == 512 and event["flags"]["--speculative-num-draft-tokens"] == "4"
    assert event["hf_token"] == "[redacted]"
