"""Parsing bench_serving JSONL across versions and bad input; comparison ratios; report edge cases.

Real client output is parsed in test_measure_sweep.py; these lines cover what it cannot produce:
older clients' key sets, torn and non-JSON lines, empty files."""
from __future__ import annotations

import json
import math

from agent.report import build_report
from tools.results import CompareResultsArgs, compare, compare_results, parse_jsonl

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
    assert parsed.records[0].accept_length == 1.0
    assert [p.split(":")[1] for p in parsed.problems] == ["2", "3", "6"]
    assert all("line skipped" in p for p in parsed.problems)


def test_empty_and_missing_files_are_problems_not_errors(tmp_path):
    (tmp_path / "x.jsonl").write_text("")
    assert parse_jsonl(tmp_path / "x.jsonl").problems == ["x.jsonl: empty (no benchmark finished)"]
    assert "no such file" in parse_jsonl(tmp_path / "gone.jsonl").problems[0]


def test_ratios_are_against_the_baseline_at_the_same_concurrency(tmp_path):
    (tmp_path / "baseline.jsonl").write_text(json.dumps({**NEW, "tag": "baseline-c8", "median_tpot_ms": 20.0,
                                                         "output_throughput": 400.0, "accept_length": None}) + "\n")
    (tmp_path / "mtp.jsonl").write_text(json.dumps(NEW) + "\n" + json.dumps({**NEW, "max_concurrency": 16, "tag": None}) + "\n")
    result = compare_results(CompareResultsArgs(files=[str(tmp_path / "mtp.jsonl"), str(tmp_path / "baseline.jsonl")]))
    rows = {(r.variant, r.concurrency): r for r in result.rows}
    assert [(r.variant, r.concurrency) for r in result.rows][0] == ("baseline", 8)  # baseline first
    assert rows[("mtp", 8)].ratios["median_tpot_ms"] == 0.5
    assert rows[("mtp", 8)].ratios["output_throughput"] == 2.0
    assert rows[("mtp", 16)].ratios["median_tpot_ms"] is None  # no baseline at 16: no ratio invented
    assert rows[("mtp", 8)].values["accept_length"] == 2.5 and rows[("baseline", 8)].values["accept_length"] is None


def test_later_record_of_a_point_wins():
    from tools.results import record_from_dict

    rows = compare([record_from_dict({**NEW, "median_tpot_ms": 1.0}, "mtp"), record_from_dict(NEW, "mtp")])
    assert len(rows) == 1 and rows[0].values["median_tpot_ms"] == 10.0


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
