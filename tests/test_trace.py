"""trace.jsonl: schema fields, sequence, redaction, torn last line, corruption, concurrency."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from agent.trace import SCHEMA_VERSION, TraceError, TraceWriter, read_trace


def test_events_carry_the_schema_fields_and_a_gap_free_sequence(tmp_path: Path):
    w = TraceWriter(tmp_path / "trace.jsonl")
    w.emit("run_started", "control", goal="g")
    w.emit("job_launched", "gpu", job="tune-gpu0", gpus=[0])
    events = read_trace(tmp_path / "trace.jsonl").events
    assert [e["seq"] for e in events] == [0, 1]
    for e in events:
        assert {"v", "seq", "t", "mono", "pid", "lane", "type"} <= e.keys() and e["v"] == SCHEMA_VERSION
    assert events[1]["lane"] == "gpu" and events[1]["gpus"] == [0]


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
    resumed.emit("run_resumed", "control")
    events = read_trace(path).events
    assert [e["seq"] for e in events] == [0, 1, 2, 3] and events[-1]["type"] == "run_resumed"
    assert read_trace(path).warning is None


def test_corruption_in_the_middle_is_an_error_naming_the_line(tmp_path: Path):
    path = tmp_path / "trace.jsonl"
    good = '{"v": 1, "seq": %d, "type": "progress", "lane": "control", "t": 0, "mono": 0, "pid": 1}\n'
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
