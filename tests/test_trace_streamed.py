"""Traces are read line by line as they are asked for, never whole (issue 40 item 6): a line over the
cap (agent/run/trace_read.py ``MAX_LINE_BYTES``) is refused in one line naming the file by ``replay``,
``replay --timeline`` and ``status``; the lines of a long trace are read from the file as the iterator
is consumed; replay stops reading at the first bad line."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.run.trace import TraceWriter
from agent.run.trace_read import MAX_LINE_BYTES, TraceError, count_events, read_events, read_trace, trace_lines
from tests.cli_helpers import run_cli
from tests.messages import assert_refusal

GOLDEN = Path(__file__).parent / "golden" / "playbook-mtp-tune"
JUNK = b"x" * (50 << 20) + b"\n"  # 50 MB: no event, and far over the cap
pytestmark = pytest.mark.no_replay("hand-made traces")


def _golden_with(tmp_path: Path, line: bytes, at: int) -> Path:
    run = tmp_path / "runs" / GOLDEN.name
    shutil.copytree(GOLDEN, run)
    lines = (run / "trace.jsonl").read_bytes().splitlines(keepends=True)
    (run / "trace.jsonl").write_bytes(b"".join([*lines[:at], line, *lines[at:]]))
    return run


@pytest.mark.parametrize("command", [["replay"], ["replay", "--timeline"]], ids=" ".join)
def test_a_50_mb_junk_line_is_refused_by_replay_in_one_line(tmp_path, command):
    run = _golden_with(tmp_path, JUNK, at=3)
    assert_refusal(run_cli(*command, str(run), cwd=tmp_path), run / "trace.jsonl", "line 4",
                   f"{MAX_LINE_BYTES >> 20} MiB")


def test_a_50_mb_junk_line_is_said_in_one_line_by_status(tmp_path):
    run = _golden_with(tmp_path, JUNK, at=3)
    out = run_cli("status", str(run), cwd=tmp_path)
    assert out.returncode == 0 and "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
    said = [line for line in out.stdout.splitlines() if "over 16 MiB" in line]
    assert len(said) == 1 and "trace: unreadable:" in said[0] and "trace.jsonl: line 4" in said[0], out.stdout


def test_the_cap_is_on_the_line_not_beside_it(tmp_path):
    path = tmp_path / "trace.jsonl"
    writer = TraceWriter(path)
    writer.emit("progress", message="one")
    writer.close()
    good = path.read_bytes()
    path.write_bytes(good + b"x" * MAX_LINE_BYTES + b"\n")  # at the cap: read, and a bad tail like any other
    assert "not JSON" in count_events(path).warning
    path.write_bytes(good + b"x" * (MAX_LINE_BYTES + 1))  # over it, even as a last line without its newline
    with pytest.raises(TraceError, match="line 2 is over"):
        read_trace(path)


def test_a_long_trace_is_read_from_the_file_as_its_lines_are_asked_for(tmp_path):
    path = tmp_path / "trace.jsonl"
    writer = TraceWriter(path)
    for i in range(20_000):
        writer.emit("progress", message=f"event {i}")
    writer.close()
    lines = path.read_bytes().splitlines(keepends=True)
    lazy = trace_lines(path)
    assert next(lazy).event["message"] == "event 0"  # the file is open, one line read
    with open(path, "r+b") as f:
        f.truncate(sum(map(len, lines[:10_000])))  # half of it gone before the rest is asked for
    rest = list(lazy)
    assert len(rest) < 10_000 and rest[-1].event["seq"] == 9_999  # what was read then, not a copy taken first
    assert count_events(path).events == 10_000 and len(read_trace(path).events) == 10_000


def test_replay_reads_no_further_than_the_first_bad_line(tmp_path):
    run = _golden_with(tmp_path, b"not json\n", at=3)
    trace = run / "trace.jsonl"
    trace.write_bytes(trace.read_bytes() + JUNK)  # beyond the bad line: never read
    events, stop = read_events(trace)
    assert len(events) == 3 and stop.startswith("line 4 is not JSON"), stop
    with pytest.raises(TraceError, match="over 16 MiB"):
        count_events(trace)  # status reads it all, and says so
