"""Timeline figures from a trace with known lane intervals, and the PNG that shows them."""
from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

from agent.replay.record import read_events
from agent.report.timeline import build_timeline, intersect, measure
from agent.report.timeline_view import PNG_META_KEY, render_terminal, timeline_for_run, write_png
from agent.run.trace_schema import validate_event

GOLDEN = Path(__file__).parent / "golden"
T0 = 1_800_000_000.0


def _event(seq: int, t: float, lane: str, type: str, **data) -> dict:
    event = {"v": 1, "seq": seq, "t": T0 + t, "mono": t, "pid": 1, "lane": lane, "type": type, **data}
    validate_event(event)  # the synthetic trace is in the documented format
    return event


def known_trace() -> list[dict]:
    """Run 0–10 s. GPU 0 job 0–5 s, GPU 1 job 3–4 s; research steps 2–4 s and 5–7 s; LLM call 8–9 s.
    Research under GPU work: [2,4] fully + [5,7] not at all = 2 of 4 s = 50%.
    GPU idle: busy 5 + 1 = 6 of 2 GPUs × 10 s = 70% idle."""
    spec = [(0, "control", "run_started", dict(goal="g", run="r", argv=[])),
            (0, "gpu", "job_launched", dict(key="tune-gpu0", gpu=0)),
            (2, "research", "tool_call", dict(tool="infer_mtp", args={})),
            (3, "gpu", "job_launched", dict(key="tune-gpu1", gpus=[1])),
            (4, "gpu", "job_finished", dict(key="tune-gpu1", gpu=1, status="succeeded")),
            (4, "research", "tool_result", dict(tool="infer_mtp", status="done", summary="", artifacts=[])),
            (5, "gpu", "job_finished", dict(key="tune-gpu0", gpu=0, status="succeeded")),
            (5, "research", "tool_call", dict(tool="write_scripts", args={})),
            (7, "research", "tool_result", dict(tool="write_scripts", status="done", summary="", artifacts=[])),
            (8, "llm", "llm_request", dict(call=1)),
            (9, "llm", "llm_response", dict(call=1, status="ok")),
            (10, "control", "run_finished", dict(status="finished", summary=""))]
    return [_event(i, t, lane, kind, **data) for i, (t, lane, kind, data) in enumerate(spec)]


def test_interval_arithmetic():
    assert measure([(0, 2), (1, 3), (5, 6)]) == 4
    assert intersect([(0, 10)], [(2, 3), (2.5, 4), (8, 12)]) == 4


def test_known_intervals_give_known_figures():
    tl = build_timeline(known_trace())
    assert tl.span == 10
    assert tl.gpus == [0, 1]
    assert tl.overlap_pct == 50.0
    assert tl.gpu_idle_pct == 70.0
    assert tl.basis == "GPU jobs"
    assert {b.lane for b in tl.bars} == {"GPU 0", "GPU 1", "research", "LLM"}
    assert [b.label for b in tl.slowest(2)] == ["tune-gpu0", "infer_mtp"]


def test_png_carries_the_overlap_computed_from_events(tmp_path):
    tl = build_timeline(known_trace())
    png = write_png(tl, tmp_path / "timeline.png")
    image = Image.open(png)
    assert image.format == "PNG" and image.size[0] >= 800
    shown = json.loads(image.text[PNG_META_KEY])
    assert shown["overlap_pct"] == 50.0 and shown["gpu_idle_pct"] == 70.0
    text = render_terminal(tl)
    assert "research under GPU work: 50.0%" in text and "GPU idle: 70.0%" in text


def test_a_reattached_job_keeps_its_first_start_and_a_second_finish_is_no_orphan():
    """A restart re-attaches to a running server (a second launch of its key) and a resumed sweep records
    a finish the first attempt had recorded already: one bar, from the first launch, and no note. A
    client that uses no GPU (``gpus: []``) is on the clients lane, not on every GPU."""
    spec = [(0, "control", "run_started", dict(goal="g", run="r", argv=[])),
            (1, "gpu", "job_launched", dict(key="serve-mtp", gpus=[0, 1])),
            (2, "gpu", "job_launched", dict(key="bench-mtp-c1", gpus=[])),
            (3, "gpu", "job_finished", dict(key="bench-mtp-c1", status="succeeded")),
            (4, "control", "run_resumed", dict(run="r", thread="attempt-2")),
            (5, "gpu", "job_launched", dict(key="serve-mtp", gpus=[0, 1], attached=True)),
            (6, "gpu", "job_finished", dict(key="bench-mtp-c1", status="succeeded")),
            (8, "gpu", "job_finished", dict(key="serve-mtp", status="stopped")),
            (9, "gpu", "job_finished", dict(key="never-launched", status="failed")),
            (10, "control", "run_finished", dict(status="finished", summary=""))]
    tl = build_timeline([_event(i, t, lane, kind, **data) for i, (t, lane, kind, data) in enumerate(spec)])
    serve = [(b.lane, b.start, b.end) for b in tl.bars if b.label == "serve-mtp"]
    assert serve == [("GPU 0", 1, 8), ("GPU 1", 1, 8)]
    assert [(b.lane, b.start, b.end) for b in tl.bars if b.label == "bench-mtp-c1"] == [("clients (no GPU)", 2, 3)]
    assert tl.gpus == [0, 1] and tl.notes == ["1 job_finished events had no job_launched (not drawn)"]


def test_png_labels_the_bars_that_have_room(tmp_path):
    tl = build_timeline(known_trace())
    shown = json.loads(Image.open(write_png(tl, tmp_path / "timeline.png")).text[PNG_META_KEY])
    assert shown["drawn"] == [b.label for b in tl.bars]
    assert sorted(shown["labelled"]) == ["call 1", "infer_mtp", "tune-gpu0", "tune-gpu1", "write_scripts"]


def test_golden_timeline_png_matches_its_events(tmp_path):
    events, stop = read_events(GOLDEN / "playbook-mtp-tune" / "trace.jsonl")
    assert stop is None
    research = [(e["t"], e["type"]) for e in events if e["lane"] == "research" and e["type"] in ("tool_call", "tool_result")]
    assert research, "the golden has research steps"
    tl, _ = timeline_for_run(GOLDEN / "playbook-mtp-tune")
    png = write_png(tl, tmp_path / "timeline.png")
    shown = json.loads(Image.open(png).text[PNG_META_KEY])
    assert shown["overlap_pct"] == round(build_timeline(events).overlap_pct, 1)
    path = [name for name, _ in tl.critical_path]
    assert path[:3] == ["preflight", "plan", "sync"] and path[-1] == "report"
    assert ("gpu_lane" in path) != ("research_lane" in path)  # one lane held up the join, the other had slack
