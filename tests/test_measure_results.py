"""Parsing bench_serving JSONL across versions and bad input; comparison ratios; report edge cases.

Real client output is parsed in test_measure_sweep.py; these lines cover what it cannot produce:
older clients' key sets, torn and non-JSON lines, empty files."""
from __future__ import annotations

import json
import math

from agent.report.build import build_report
from tools.measure.results import parse_jsonl
from tools.measure.verdict import decide, point_stats, ratio

NEW = {"tag": "mtp-c8", "backend": "sglang", "max_concurrency": 8, "median_ttft_ms": 50.0, "p99_ttft_ms": 90.0,
       "median_tpot_ms": 10.0, "p99_tpot_ms": 14.0, "median_itl_ms": 9.0, "p99_itl_ms": 30.0,
       "output_throughput": 800.0, "accept_length": 2.5, "completed": 64}
# An older client: no max_concurrency, no accept_length, no p99 TPOT; accept length in server_info only.
OLD = {"backend": "sglang", "median_ttft_ms": 100.0, "median_tpot_ms": 20.0, "median_itl_ms": 18.0,
       "output_throughput": "400.0", "server_info": {"internal_states": [{"avg_spec_accept_length": 1.0}]}}


def test_old_and_new_key_sets_infinity_and_bad_lines(tmp_path):
    path = tmp_path / "baseline.jsonl"
    old = json.dumps({**OLD, "tag": "baseline-c8"})
    path.write_text('{"request_rate": Infinity, ' + old[1:] + "\n" + "not json at all\n[1, 2]\n\n"
                    + json.dumps({**OLD, "max_concurrency": 1, "request_rate": "inf"}) + "\n" + '{"torn": ')
    parsed = parse_jsonl(path)
    assert [r.concurrency for r in parsed.records] == [8, 1]  # from the tag, then the key
    assert parsed.records[0].request_rate == math.inf and parsed.records[1].request_rate == math.inf
    assert parsed.records[0].metrics["output_throughput"] == 400.0 and parsed.records[0].metrics["p99_tpot_ms"] is None
    # no server snapshots next to the file: the client's cumulative figure is kept, never shown as the point's
    assert parsed.records[0].accept_length is None and parsed.records[0].accept_length_cumulative == 1.0
    assert not parsed.records[0].accept_isolated and parsed.records[0].accept_method == "no-snapshots"
    assert [p.split(":")[1] for p in parsed.problems] == ["2", "3", "6"]
    assert all("line skipped" in p for p in parsed.problems)


def snap(tag: str, phase: str, tokens: float | None, verifies: float | None, avg: float | None,
         errors: list[str] | None = None) -> dict:
    return {"tag": tag, "phase": phase, "time": 0.0, "avg_spec_accept_length": avg, "generation_tokens": tokens,
            "verify_calls": verifies, "errors": errors or []}


def write_snapshots(folder, variant: str, items: list[dict], extra: str = "") -> None:
    (folder / "snapshots").mkdir(exist_ok=True)
    (folder / "snapshots" / f"{variant}.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items) + extra)


def test_point_accept_length_from_counters_first_point_or_not_isolated():
    from tools.measure.accept_snapshots import Snapshot, point_accept_length

    def pal(before, after):
        return point_accept_length(Snapshot(**before) if before else None, Snapshot(**after) if after else None)

    exact = pal(snap("t", "before", 1000, 250, 4.0), snap("t", "after", 1600, 550, 3.0))
    assert (exact.value, exact.isolated, exact.method) == (2.0, True, "counters")  # 600 / 300, not 3.0
    first = pal(snap("t", "before", None, None, None), snap("t", "after", None, None, 3.4))
    assert (first.value, first.isolated, first.method) == (3.4, True, "first-point-average")
    mixed = pal(snap("t", "before", None, None, 4.0), snap("t", "after", None, None, 3.4))
    assert (mixed.value, mixed.isolated, mixed.method) == (None, False, "not-isolated")
    assert "--enable-metrics" in mixed.note
    base = pal(snap("t", "before", 10, 0, None), snap("t", "after", 90, 0, None))
    assert (base.value, base.isolated, base.method) == (None, True, "no-speculation")
    restarted = pal(snap("t", "before", 900, 300, 3.0), snap("t", "after", 50, 20, 2.5))
    assert (restarted.value, restarted.isolated) == (None, False) and "backwards" in restarted.note
    failed = pal(snap("t", "before", None, None, None, ["/server_info: refused"]),
                 snap("t", "after", None, None, None, ["/server_info: refused"]))
    assert (failed.isolated, failed.method) == (False, "not-isolated") and "refused" in failed.note
    assert pal(None, None).method == "no-snapshots"


def test_rerun_point_uses_its_last_snapshot_pair_and_bad_snapshot_lines_are_problems(tmp_path):
    (tmp_path / "mtp.jsonl").write_text(json.dumps({**NEW, "tag": "mtp-c8"}) + "\n")
    write_snapshots(tmp_path, "mtp", [snap("mtp-c8", "before", 0, 0, None), snap("mtp-c8", "before", 100, 50, 2.0),
                                      snap("mtp-c8", "after", 400, 150, 2.5)], extra='{"torn"\n')
    parsed = parse_jsonl(tmp_path / "mtp.jsonl")
    assert parsed.records[0].accept_length == 3.0 and parsed.records[0].accept_length_cumulative == 2.5
    assert len(parsed.problems) == 1 and parsed.problems[0].startswith("snapshots/mtp.jsonl:4: not a snapshot")


def test_report_marks_accept_lengths_that_are_not_isolated(tmp_path):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "mtp.jsonl").write_text(json.dumps({**NEW, "tag": "mtp-c1", "max_concurrency": 1}) + "\n"
                                     + json.dumps({**NEW, "accept_length": 2.2}) + "\n")
    write_snapshots(bench, "mtp", [snap("mtp-c1", "before", None, None, None), snap("mtp-c1", "after", None, None, 2.5),
                                   snap("mtp-c8", "before", None, None, 2.5), snap("mtp-c8", "after", None, None, 2.2)])
    build_report(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| mtp | 1 |" in md and "| 2.50 |" in md.split("| mtp | 1 |")[1].splitlines()[0]
    row8 = md.split("| mtp | 8 |")[1].splitlines()[0]
    assert "n/a† (cum. 2.20)" in row8 and "| 2.20 |" not in row8
    assert "† mtp at concurrency 8: accept length not isolated: the server exposes only a cumulative" in md
    assert 'class="not-isolated"' in (tmp_path / "report.html").read_text()


def test_empty_and_missing_files_are_problems_not_errors(tmp_path):
    (tmp_path / "x.jsonl").write_text("")
    assert parse_jsonl(tmp_path / "x.jsonl").problems == ["x.jsonl: empty (no benchmark finished)"]
    assert "no such file" in parse_jsonl(tmp_path / "gone.jsonl").problems[0]


def test_ratios_are_against_the_baseline_at_the_same_concurrency(tmp_path):
    (tmp_path / "baseline.jsonl").write_text(json.dumps({**NEW, "tag": "baseline-c8", "median_tpot_ms": 20.0,
                                                         "output_throughput": 400.0, "accept_length": None}) + "\n")
    (tmp_path / "mtp.jsonl").write_text(json.dumps(NEW) + "\n" + json.dumps({**NEW, "max_concurrency": 16, "tag": None}) + "\n")
    write_snapshots(tmp_path, "mtp", [snap("mtp-c8", "before", 100, 40, 3.0), snap("mtp-c8", "after", 600, 240, 2.7)])
    records = [r for name in ("mtp", "baseline") for r in parse_jsonl(tmp_path / f"{name}.jsonl").records]
    points = {(p.variant, p.concurrency): p for p in point_stats(records)}
    mtp, base = points[("mtp", 8)], points[("baseline", 8)]
    assert ratio(mtp.metrics["median_tpot_ms"], base.metrics["median_tpot_ms"]).value == 0.5
    assert ratio(mtp.metrics["output_throughput"], base.metrics["output_throughput"]).value == 2.0
    sixteen = decide(records, {}).levels[1]
    assert sixteen.concurrency == 16 and sixteen.tpot_ratio is None and not sixteen.baseline_measured  # none invented
    assert mtp.accept_length == 2.5 and mtp.tpot_ceiling == 0.4  # (600-100) tokens / (240-40) verify calls
    isolated = {(r.variant, r.concurrency): r.accept_isolated for r in records}
    assert base.accept_length is None and isolated[("baseline", 8)]
    assert points[("mtp", 16)].accept_length is None and not isolated[("mtp", 16)]


def test_later_record_of_a_point_wins():
    from tools.measure.results import record_from_dict

    points = point_stats([record_from_dict({**NEW, "median_tpot_ms": 1.0}, "mtp"), record_from_dict(NEW, "mtp")])
    assert len(points) == 1 and points[0].metrics["median_tpot_ms"].median == 10.0


def test_report_without_results_and_with_failures_keeps_partial_results(tmp_path):
    bench = tmp_path / "bench"
    bench.mkdir()
    paths = build_report(tmp_path)
    assert "No benchmark results" in (tmp_path / "report.md").read_text() and len(paths) == 2
    (bench / "baseline.jsonl").write_text(json.dumps({**NEW, "tag": "baseline-c8"}) + "\n")
    (bench / "mtp.failures.jsonl").write_text(json.dumps({"variant": "mtp", "concurrency": 8, "reason":
                                                          "server was not ready\nlog...", "log": "x.log"}) + "\nbad\n")
    (bench / "baseline.failures.jsonl").write_text(json.dumps({"variant": "baseline", "concurrency": 8,
                                                               "reason": "old failure, retried fine"}) + "\n")
    build_report(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| baseline | 8 |" in md and "mtp at concurrency 8: server was not ready (log: x.log)" in md
    assert "old failure" not in md and "mtp.failures.jsonl:2: not JSON" in md
    assert (tmp_path / "plots" / "tpot_vs_concurrency.png").read_bytes()[:4] == b"\x89PNG"


def test_redaction_never_cuts_into_an_embedded_plot(tmp_path):
    """A remembered secret that happens to occur in a plot's base64 is redacted from the text, never from the
    image: every figure in report.html is the PNG on disk, byte for byte."""
    import base64
    import re

    from agent import secrets

    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "mtp.jsonl").write_text(json.dumps(NEW) + "\n")
    build_report(tmp_path)
    png = sorted((tmp_path / "plots").glob("*.png"))[0]
    inside = base64.b64encode(png.read_bytes()).decode()[200:212]
    assert inside.isascii() and len(inside) == 12
    secrets.remember(inside)
    try:
        build_report(tmp_path)
    finally:
        secrets._known.discard(inside)
    page = (tmp_path / "report.html").read_text()
    embedded = [base64.b64decode(d) for d in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]
    on_disk = {p.read_bytes() for p in (tmp_path / "plots").glob("*.png")}
    assert embedded and set(embedded) == on_disk
    assert "dsv4-image-" not in page  # every slot was filled
